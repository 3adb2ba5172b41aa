"""A fake OpenAI-compatible transcription endpoint on loopback: `POST /v1/audio/transcriptions`, multipart, as OpenAI.

It parses the upload with aiohttp's multipart reader and refuses what OpenAI refuses (no `file`, no `model`: 400,
a wrong key: 401). `answer` decides the rest; by default it answers `{"text": <text>}`. Runs in the test's loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import BodyPartReader, web


@dataclass
class Upload:
    """One request as the endpoint saw it."""

    authorization: str | None
    content_type: str
    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    file_type: str | None = None
    audio: bytes = b""


def text_answer(text: str) -> Callable[[Upload], web.Response]:
    return lambda upload: web.json_response({"text": text})


class FakeTranscription:
    def __init__(self, *, key: str | None = "voice-key", text: str = "remind me to water the plants") -> None:
        self.key = key
        # What the endpoint answers a well-formed upload with; may be a coroutine (one that waits, say).
        self.answer: Callable[[Upload], web.Response | Awaitable[web.Response]] = text_answer(text)
        self.uploads: list[Upload] = []
        self.arrived = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> FakeTranscription:
        app = web.Application(client_max_size=30 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _transcribe(self, request: web.Request) -> web.Response:
        upload = Upload(request.headers.get("Authorization"), request.headers.get("Content-Type", ""))
        self.uploads.append(upload)
        self.arrived.set()
        if self.key is not None and upload.authorization != f"Bearer {self.key}":
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        if not upload.content_type.startswith("multipart/form-data"):
            return _error(400, "Expected multipart/form-data.", "invalid_request_error")
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            assert isinstance(part, BodyPartReader)
            if part.name == "file":
                upload.filename, upload.file_type = part.filename, part.headers.get("Content-Type")
                upload.audio = await part.read()
            elif part.name:
                upload.fields[part.name] = await part.text()
        if upload.filename is None or not upload.audio:
            return _error(400, "you must provide a 'file'", "invalid_request_error")
        if "model" not in upload.fields:
            return _error(400, "you must provide a model parameter", "invalid_request_error")
        answer = self.answer(upload)
        return await answer if inspect.isawaitable(answer) else answer


def _error(status: int, message: str, code: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")
