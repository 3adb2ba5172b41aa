"""The HTTP side of both completion adapters: headers, retries and their delays, timeouts, wrong-shaped replies."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from bicameral.models.anthropic import API_VERSION, AnthropicModel
from bicameral.models.base import Message, ModelError, complete
from bicameral.models.openai import OpenAIModel
from bicameral.models.remote import RemoteModel
from bicameral.net import Proxies
from tests.fakes.model_server import ModelServer, Reply

API_KEY = "sk-test-http-0123456789"
Build = Callable[..., RemoteModel]


@pytest.fixture
def slept() -> list[float]:
    """The delays the model under test waited between tries (recorded, not slept)."""
    return []


@pytest.fixture(params=["anthropic", "openai"])
async def build(
    request: pytest.FixtureRequest, models: ModelServer, tmp_path: Path, slept: list[float]
) -> AsyncIterator[Build]:
    """Build the adapter under test against `models` (or `base_url`), closing it afterwards."""
    built: list[RemoteModel] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    def factory(
        *, max_retries: int = 0, api_key: str | None = API_KEY, base_url: str | None = None, timeout: float = 10.0
    ) -> RemoteModel:
        cls: Any = AnthropicModel if request.param == "anthropic" else OpenAIModel
        url = base_url or (models.url if request.param == "anthropic" else models.openai_url)
        model = cls("m", api_key=api_key, base_url=url, max_retries=max_retries, timeout=timeout, data_dir=tmp_path, sleep=record)
        built.append(model)
        return model

    factory.api = request.param  # type: ignore[attr-defined]
    yield factory
    for model in built:
        await model.aclose()


async def _ask(model: RemoteModel) -> str:
    return (await complete(model, "sys", [Message.user("hi")], [], 32)).text


# ---- what goes on the wire ------------------------------------------------------------------------


async def test_each_api_gets_its_own_credentials_header(build: Build, models: ModelServer) -> None:
    await _ask(build())
    headers = {k.lower(): v for k, v in models.requests[0].headers.items()}
    if build.api == "anthropic":  # type: ignore[attr-defined]
        assert headers["x-api-key"] == API_KEY and headers["anthropic-version"] == API_VERSION
        assert "authorization" not in headers
    else:
        assert headers["authorization"] == f"Bearer {API_KEY}" and "x-api-key" not in headers
    assert headers["content-type"] == "application/json"


async def test_without_a_key_no_credentials_are_made_up(build: Build, models: ModelServer) -> None:
    assert await _ask(build(api_key=None)) == "ok"
    headers = {k.lower() for k in models.requests[0].headers}
    assert not headers & {"authorization", "x-api-key"}


async def test_a_key_pasted_with_its_line_break_is_refused_unsent_and_unquoted(build: Build, models: ModelServer) -> None:
    key = "pasted-key-0123456789\nx-injected: yes"
    with pytest.raises(ModelError) as caught:
        await _ask(build(api_key=key))
    assert "forbids" in str(caught.value) and "pasted-key" not in str(caught.value)
    assert models.requests == []


async def test_the_body_keeps_text_beyond_ascii_as_utf8(build: Build, models: ModelServer) -> None:
    model = build()
    await complete(model, "sys", [Message.user("Grüße, 世界")], [], 32)
    assert models.requests[0].last_user_text() == "Grüße, 世界"


async def test_a_lone_surrogate_in_the_history_does_not_sink_the_request(build: Build, models: ModelServer) -> None:
    model = build()
    result = await complete(model, "sys", [Message.user("broken \ud800 half")], [], 32)
    assert result.text == "ok"
    assert models.requests[0].last_user_text() == "broken ? half"


# ---- retries --------------------------------------------------------------------------------------


async def test_server_errors_are_retried_after_the_backoff_or_the_asked_delay(
    build: Build, models: ModelServer, slept: list[float]
) -> None:
    models.script(
        Reply(error_status=500),
        Reply(error_status=429, retry_after=2.5),
        Reply(error_status=503, headers={"retry-after-ms": "1200"}),
        Reply(text="third time lucky"),
    )
    assert await _ask(build(max_retries=3)) == "third time lucky"
    assert [r.status for r in await models.await_completed(4)] == [500, 429, 503, 200]
    assert slept == [0.5, 2.5, 1.2]


async def test_retries_stop_at_the_limit_with_the_last_error(build: Build, models: ModelServer, slept: list[float]) -> None:
    models.script(*(Reply(error_status=529, error_message="busy") for _ in range(3)))
    with pytest.raises(ModelError) as caught:
        await _ask(build(max_retries=2))
    assert caught.value.kind == "overloaded" and "HTTP 529" in str(caught.value)
    assert len(await models.await_completed(3)) == 3 and slept == [0.5, 1.0]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(error_status=400, error_message="bad"), "bad_request"),
        (Reply(error_status=401, error_message="who"), "auth"),
        (Reply(error_status=500, headers={"x-should-retry": "false"}), "server"),
    ],
)
async def test_what_a_retry_cannot_cure_is_not_retried(
    build: Build, models: ModelServer, slept: list[float], reply: Reply, kind: str
) -> None:
    models.script(reply, Reply(text="never asked for"))
    with pytest.raises(ModelError) as caught:
        await _ask(build(max_retries=3))
    assert caught.value.kind == kind
    assert len(models.requests) == 1 and slept == []


async def test_the_server_may_ask_for_a_retry_of_a_client_error(build: Build, models: ModelServer, slept: list[float]) -> None:
    models.script(Reply(error_status=400, headers={"x-should-retry": "true"}), Reply(text="fine now"))
    assert await _ask(build(max_retries=1)) == "fine now"
    assert slept == [0.5]


async def test_a_retry_after_date_is_waited_for(build: Build, models: ModelServer, slept: list[float]) -> None:
    later = formatdate(time.time() + 5, usegmt=True)
    models.script(Reply(error_status=503, headers={"retry-after": later}), Reply(text="ok"))
    assert await _ask(build(max_retries=1)) == "ok"
    # The date has whole seconds, and the answer takes its time to arrive.
    assert len(slept) == 1 and 2 < slept[0] <= 5


async def test_an_absurd_retry_after_falls_back_to_the_backoff(build: Build, models: ModelServer, slept: list[float]) -> None:
    models.script(Reply(error_status=429, retry_after=86_400), Reply(text="ok"))
    assert await _ask(build(max_retries=1)) == "ok"
    assert slept == [0.5]


async def test_an_unreachable_server_is_tried_again_then_reported(build: Build, slept: list[float]) -> None:
    with pytest.raises(ModelError) as caught:
        await _ask(build(max_retries=2, base_url="http://127.0.0.1:9"))
    assert caught.value.kind == "connection" and caught.value.retryable
    assert slept == [0.5, 1.0]


async def test_a_silent_server_is_a_timeout(build: Build, models: ModelServer) -> None:
    models.script(Reply(text="too late", latency=30))
    with pytest.raises(ModelError) as caught:
        await _ask(build(timeout=0.3))
    assert caught.value.kind == "timeout" and caught.value.retryable and "0.3s" in str(caught.value)


# ---- replies of the wrong shape -------------------------------------------------------------------


class RawServer:
    """Answers every request with one fixed event stream, over real HTTP."""

    def __init__(self, events: list[str]) -> None:
        self.body = "".join(f"data: {event}\n\n" for event in events).encode()
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            + f"content-length: {len(self.body)}\r\n\r\n".encode()
            + self.body
        )
        await writer.drain()
        writer.close()


@pytest.mark.parametrize(
    ("api", "events"),
    [
        ("openai", ['{"choices": [1]}']),
        ("openai", ['{"choices": [{"delta": {"tool_calls": [{"function": "oops"}]}}]}']),
        ("anthropic", ['{"type": "message_start"}']),
        ("anthropic", ['{"type": "content_block_delta", "index": 0, "delta": "text"}']),
        ("anthropic", ["[]"]),
    ],
)
async def test_valid_json_of_the_wrong_shape_is_a_malformed_reply(tmp_path: Path, api: str, events: list[str]) -> None:
    async with RawServer(events) as raw:
        cls: Any = AnthropicModel if api == "anthropic" else OpenAIModel
        model = cls("m", api_key=API_KEY, base_url=raw.url, max_retries=0, timeout=10.0, data_dir=tmp_path)
        try:
            with pytest.raises(ModelError) as caught:
                await _ask(model)
        finally:
            await model.aclose()
    assert caught.value.kind == "server" and "malformed reply" in str(caught.value)


async def test_an_openai_stream_ends_at_done(tmp_path: Path) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
    async with RawServer([json.dumps(chunk), "[DONE]", "not json at all"]) as raw:
        model = OpenAIModel("m", api_key=API_KEY, base_url=raw.url, max_retries=0, timeout=10.0, data_dir=tmp_path)
        try:
            assert await _ask(model) == "hi"
        finally:
            await model.aclose()


# ---- connections ----------------------------------------------------------------------------------


class FlakyServer:
    """Keeps connections alive; connection n answers `answers[n]` requests (all when not listed), then closes
    without a word once the next request has arrived."""

    def __init__(self, answers: dict[int, int]) -> None:
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
        self.body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        self.answers = answers
        self.accepted = 0
        self.answered: list[int] = []  # the connection each answer went out on
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FlakyServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index, self.accepted = self.accepted, self.accepted + 1
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).lower()
                await reader.readexactly(int(head.split(b"content-length:")[1].split(b"\r\n")[0]))
                if self.answered.count(index) >= self.answers.get(index, 1_000):
                    return
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + f"content-length: {len(self.body)}\r\n\r\n".encode()
                    + self.body
                )
                await writer.drain()
                self.answered.append(index)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_a_connection_that_closes_before_answering_is_replaced_at_once(tmp_path: Path, slept: list[float]) -> None:
    """What a kept-alive connection the server gave up on looks like: sent again on a new one, no retry spent."""
    async with FlakyServer(answers={0: 1}) as flaky:
        model = OpenAIModel("m", api_key=API_KEY, base_url=flaky.url, max_retries=0, timeout=10.0, data_dir=tmp_path,
                            sleep=_record(slept))
        try:
            assert await _ask(model) == "hi"  # on connection 0, kept alive
            assert await _ask(model) == "hi"  # connection 0 dies with it; connection 1 answers
            assert await _ask(model) == "hi"
        finally:
            await model.aclose()
    assert flaky.answered == [0, 1, 1] and flaky.accepted == 2 and slept == []

    async with FlakyServer(answers={0: 0}) as flaky:
        model = OpenAIModel("m", api_key=API_KEY, base_url=flaky.url, max_retries=0, timeout=10.0, data_dir=tmp_path,
                            sleep=_record(slept))
        try:
            assert await _ask(model) == "hi"
        finally:
            await model.aclose()
    assert flaky.answered == [1] and slept == []


async def test_connections_that_keep_closing_before_answering_are_a_connection_error(tmp_path: Path, slept: list[float]) -> None:
    async with FlakyServer(answers={0: 0, 1: 0, 2: 0, 3: 0}) as flaky:
        model = OpenAIModel("m", api_key=API_KEY, base_url=flaky.url, max_retries=1, timeout=10.0, data_dir=tmp_path,
                            sleep=_record(slept))
        try:
            with pytest.raises(ModelError) as caught:
                await _ask(model)
        finally:
            await model.aclose()
    assert caught.value.kind == "connection" and caught.value.retryable
    assert flaky.accepted == 3 and slept == [0.5]  # once at once, then once after the backoff


async def test_a_proxy_that_cannot_connect_is_a_connection_error(tmp_path: Path, slept: list[float]) -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(3)  # a SOCKS5 greeting offering one method
        writer.write(b"\x05\xff")  # none acceptable
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    proxies = Proxies.from_environment({"ALL_PROXY": f"socks5://127.0.0.1:{server.sockets[0].getsockname()[1]}"})
    model = OpenAIModel("m", api_key=API_KEY, base_url="http://api.invalid", max_retries=1, timeout=10.0, data_dir=tmp_path,
                        proxies=proxies, sleep=_record(slept))
    try:
        with pytest.raises(ModelError) as caught:
            await _ask(model)
    finally:
        await model.aclose()
        server.close()
    assert caught.value.kind == "connection" and "through the proxy" in str(caught.value) and slept == [0.5]


def _record(slept: list[float]) -> Callable[[float], Awaitable[None]]:
    async def record(seconds: float) -> None:
        slept.append(seconds)

    return record
