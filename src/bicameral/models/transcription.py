"""An OpenAI-compatible transcription endpoint: `POST {base}/audio/transcriptions`, multipart, answered with JSON text."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import httpx

from bicameral.errors import BicameralError
from bicameral.net import Proxies
from bicameral.net.client import ServiceTransport

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# OpenAI refuses uploads past 25 MB; other servers take at least as much, so nothing larger is sent.
MAX_UPLOAD_BYTES = 25 * 1024 * 1024

FailureKind = Literal["auth", "refused", "server", "garbage", "connection", "timeout"]


@dataclass(frozen=True)
class TranscriptionEndpoint:
    """Where voice goes to be written down: the API root (with its version), the model, the key (never shown)."""

    base_url: str
    model: str = "whisper-1"
    api_key: str | None = field(default=None, repr=False)
    timeout_seconds: float = 120.0
    proxy_variables: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/audio/transcriptions"


class TranscriptionFailed(BicameralError):
    """The endpoint gave no transcript; `kind` says why (the reader turns it into a sentence), the message for logs."""

    def __init__(self, kind: FailureKind, detail: str) -> None:
        super().__init__(detail)
        self.kind: FailureKind = kind


async def transcribe(endpoint: TranscriptionEndpoint, audio: bytes, filename: str, mime: str) -> str:
    """The words in `audio` (`filename`'s extension names its format, as the API expects); TranscriptionFailed else."""
    if len(audio) > MAX_UPLOAD_BYTES:
        raise TranscriptionFailed("refused", f"{len(audio)} bytes is over the {MAX_UPLOAD_BYTES}-byte upload limit")
    headers = {"accept": "application/json"}
    if endpoint.api_key:
        headers["authorization"] = f"Bearer {endpoint.api_key}"
    form = {"model": endpoint.model, "response_format": "json"}
    # Voice notes are rare next to messages: one connection per note, closed after it, holds nothing between them.
    transport = ServiceTransport(Proxies.from_environment(endpoint.proxy_variables), connections=1)
    try:
        response = await transport.request(
            "POST", endpoint.url, timeout=httpx.Timeout(endpoint.timeout_seconds), headers=headers,
            data=form, files={"file": (filename, audio, mime)},
        )
        try:
            body = await response.aread()
        finally:
            await response.aclose()
    except httpx.TimeoutException as err:
        raise TranscriptionFailed("timeout", f"no answer from {endpoint.url} in {endpoint.timeout_seconds:g} s") from err
    except httpx.HTTPError as err:
        raise TranscriptionFailed("connection", f"{endpoint.url}: {type(err).__name__}: {err}") from err
    finally:
        await transport.aclose()
    return _text(endpoint.url, response.status_code, body)


def _text(url: str, status: int, body: bytes) -> str:
    """The transcript in a JSON answer `{"text": ...}`, or why there is none."""
    shown = body[:300].decode("utf-8", "replace")
    if status in (401, 403):
        raise TranscriptionFailed("auth", f"{url} refused the key (HTTP {status}): {shown}")
    if status in (400, 413, 415, 422):
        raise TranscriptionFailed("refused", f"{url} refused the audio (HTTP {status}): {shown}")
    if status >= 300:
        raise TranscriptionFailed("server", f"{url} answered HTTP {status}: {shown}")
    try:
        parsed = json.loads(body)
    except ValueError:
        raise TranscriptionFailed("garbage", f"{url} answered with something other than JSON: {shown!r}") from None
    text = parsed.get("text") if isinstance(parsed, dict) else None
    if not isinstance(text, str):
        raise TranscriptionFailed("garbage", f"{url} answered JSON without a text: {shown!r}")
    return text.strip()
