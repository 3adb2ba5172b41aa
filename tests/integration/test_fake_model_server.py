"""The fake model server must satisfy the real anthropic and openai SDKs, unmodified."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator

import anthropic
import openai
import pytest

from tests.fakes.model_server import ModelServer, Reply, Request, ToolCall, echo_responder

WEATHER_TOOL_ANTHROPIC = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER_TOOL_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
NESTED_INPUT = {"city": "Zürich", "opts": {"units": "metric", "days": [1, 2, 3]}, "note": "a \"quoted\" value"}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    """A fresh server per test."""
    with ModelServer() as srv:
        yield srv


@pytest.fixture
async def claude(server: ModelServer):
    """Anthropic async client without retries."""
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
    yield client
    await client.close()


@pytest.fixture
async def gpt(server: ModelServer):
    """OpenAI async client without retries."""
    client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0)
    yield client
    await client.close()


# ---- Anthropic --------------------------------------------------------------------------------------


async def test_anthropic_text_non_streaming(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.script(Reply(text="Hello there"))
    msg = await claude.messages.create(
        model="claude-test",
        max_tokens=100,
        system=[{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Be kind."}],
        messages=[{"role": "user", "content": "hi"}],
    )
    assert msg.content[0].type == "text" and msg.content[0].text == "Hello there"
    assert msg.role == "assistant" and msg.model == "claude-test" and msg.stop_reason == "end_turn"
    assert msg.id.startswith("msg_") and msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    (req,) = server.requests
    assert req.api == "anthropic" and req.model == "claude-test" and not req.stream
    assert req.system == "You are terse.\nBe kind."
    assert req.last_user_text() == "hi"
    assert req.status == 200 and req.reply is not None
    assert req.response is not None and req.response["id"] == msg.id


async def test_anthropic_default_reply_is_ok(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    msg = await claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert msg.content[0].text == "ok"


async def test_anthropic_streaming_text(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    text = "The quick  brown fox\njumps over the lazy dog. "
    server.script(Reply(text=text, chunk_delay=0.001))
    async with claude.messages.stream(
        model="claude-test", max_tokens=100, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        pieces = [t async for t in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(pieces) == text and len(pieces) > 3
    assert final.content[0].text == text and final.stop_reason == "end_turn"
    (req,) = server.requests
    assert req.stream
    types = [e["type"] for e in req.events]
    assert types[:2] == ["message_start", "ping"]
    assert types[-2:] == ["message_delta", "message_stop"]
    assert types.count("content_block_start") == types.count("content_block_stop") == 1


async def test_anthropic_raw_stream_events(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.script(Reply(chunks=["a", "b", "c"]))
    stream = await claude.messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}], stream=True
    )
    events = [e async for e in stream]
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]  # ping is swallowed by the SDK
    assert [e.delta.text for e in events if e.type == "content_block_delta"] == ["a", "b", "c"]


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_tool_calls(server: ModelServer, claude: anthropic.AsyncAnthropic, stream: bool) -> None:
    server.script(
        Reply(
            text="Let me check.",
            tool_calls=[ToolCall("get_weather", NESTED_INPUT), ToolCall("get_weather", {"city": "Oslo"}, id="toolu_x")],
        ),
        echo_responder,
    )
    kwargs = dict(model="claude-test", max_tokens=100, tools=[WEATHER_TOOL_ANTHROPIC])
    messages = [{"role": "user", "content": "weather?"}]
    if stream:
        async with claude.messages.stream(messages=messages, **kwargs) as s:
            msg = await s.get_final_message()
    else:
        msg = await claude.messages.create(messages=messages, **kwargs)
    assert msg.stop_reason == "tool_use"
    assert [b.type for b in msg.content] == ["text", "tool_use", "tool_use"]
    first, second = msg.content[1], msg.content[2]
    assert first.name == "get_weather" and first.input == NESTED_INPUT and first.id.startswith("toolu_")
    assert second.id == "toolu_x" and second.input == {"city": "Oslo"}

    follow = await claude.messages.create(
        messages=[
            *messages,
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": first.id, "content": "sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_x",
                        "content": [{"type": "text", "text": "boom"}],
                        "is_error": True,
                    },
                ],
            },
        ],
        **kwargs,
    )
    assert follow.content[0].text == "echo: sunny\nboom"
    req = server.requests[-1]
    assert req.tool_names == ["get_weather"]
    assert req.tool_results() == [
        {"tool_use_id": first.id, "id": first.id, "content": "sunny", "is_error": False},
        {"tool_use_id": "toolu_x", "id": "toolu_x", "content": "boom", "is_error": True},
    ]


async def test_anthropic_tool_only_reply_has_no_text_block(
    server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    server.script(Reply(tool_calls=[ToolCall("get_weather", {"city": "Rome"})]))
    msg = await claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert [b.type for b in msg.content] == ["tool_use"]


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_usage_with_cache_fields(
    server: ModelServer, claude: anthropic.AsyncAnthropic, stream: bool
) -> None:
    server.script(Reply(text="hi", usage=(11, 7), cache_creation_input_tokens=100, cache_read_input_tokens=200))
    kwargs = dict(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    if stream:
        async with claude.messages.stream(**kwargs) as s:
            msg = await s.get_final_message()
    else:
        msg = await claude.messages.create(**kwargs)
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (11, 7)
    assert msg.usage.cache_creation_input_tokens == 100
    assert msg.usage.cache_read_input_tokens == 200


async def test_anthropic_stop_reason_override(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.script(Reply(text="trunc", stop_reason="max_tokens"), Reply(text="x", stop_reason="length"))
    for _ in range(2):
        msg = await claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
        assert msg.stop_reason == "max_tokens"  # OpenAI vocabulary is translated


async def test_anthropic_count_tokens(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    res = await claude.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello " * 100}])
    assert res.input_tokens > 50
    assert server.requests == [] and len(server.count_tokens_requests) == 1


async def test_anthropic_rejects_missing_max_tokens(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        await claude.post("/v1/messages", body={"model": "m", "messages": []}, cast_to=object)
    assert info.value.type == "invalid_request_error" and "max_tokens" in str(info.value)
    assert server.rejected and server.requests == []


# ---- errors and retries -----------------------------------------------------------------------------


async def test_anthropic_429_retry_after_is_retried(server: ModelServer) -> None:
    server.script(Reply(error_status=429, error_message="slow down", retry_after=0.05), Reply(text="finally"))
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=2)
    msg = await client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    await client.close()
    assert msg.content[0].text == "finally"
    first, second = server.wait_for_requests(2)
    assert first.status == 429 and second.status == 200
    assert first.response == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
        "request_id": first.response["request_id"],
    }
    assert second.headers.get("x-stainless-retry-count") == "1"
    assert second.received_at - first.received_at >= 0.04  # the SDK honoured retry-after


async def test_anthropic_429_exhausted_raises_rate_limit(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.script(Reply(error_status=429, retry_after=3))
    with pytest.raises(anthropic.RateLimitError) as info:
        await claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert info.value.response.headers["retry-after"] == "3"
    assert info.value.type == "rate_limit_error"


async def test_anthropic_529_overloaded(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.script(Reply(error_status=529, error_message="Overloaded"))
    with pytest.raises(anthropic.InternalServerError) as info:
        await claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert isinstance(info.value, anthropic.OverloadedError)
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
    assert info.value.api_message == "Overloaded"
    assert len(server.requests) == 1


async def test_anthropic_500_streaming_request(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.script(Reply(error_status=500))
    with pytest.raises(anthropic.InternalServerError) as info:
        async with claude.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
            await s.get_final_message()
    assert info.value.type == "api_error"


async def test_openai_429_retry(server: ModelServer) -> None:
    server.script(Reply(error_status=429), Reply(text="done"))
    client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=2)
    res = await client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
    await client.close()
    assert res.choices[0].message.content == "done"
    assert [r.status for r in server.requests] == [429, 200]
    assert server.requests[0].response["error"]["code"] == "rate_limit_exceeded"


async def test_openai_error_shape(server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    server.script(Reply(error_status=500, error_message="kaboom"))
    with pytest.raises(openai.InternalServerError) as info:
        await gpt.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
    assert info.value.message.startswith("Error code: 500")
    assert info.value.body == {"message": "kaboom", "type": "server_error", "param": None, "code": None}


async def test_broken_scripted_callable_surfaces(server: ModelServer) -> None:
    def bad(req: Request) -> Reply:
        raise ValueError("script bug")

    server.script(bad)
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=2)
    with pytest.raises(anthropic.InternalServerError) as info:
        await client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    await client.close()
    assert "script bug" in str(info.value)
    assert len(server.requests) == 1  # x-should-retry: false stops the SDK retrying
    assert isinstance(server.errors[0], ValueError)


async def test_stream_abort_surfaces_as_connection_error(
    server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    server.script(Reply(text="one two three four five", abort_after_events=4))
    got: list[str] = []
    # anthropic lets httpx's RemoteProtocolError escape mid-stream; openai wraps it in APIConnectionError.
    with pytest.raises(Exception, match="incomplete chunked read"):
        async with claude.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
            async for t in s.text_stream:
                got.append(t)
    assert "".join(got) == "one "  # message_start, ping, content_block_start, first delta; then the cut
    assert len(server.requests[0].events) == 4


async def test_openai_stream_abort(server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    server.script(Reply(text="one two three", abort_after_events=2))
    got: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        stream = await gpt.chat.completions.create(model="g", messages=[{"role": "user", "content": "x"}], stream=True)
        async for c in stream:
            got.append(c.choices[0].delta.content or "")
    assert "".join(got) == "one "


# ---- OpenAI -----------------------------------------------------------------------------------------


async def test_openai_text_non_streaming(server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    server.script(Reply(text="Hi from gpt"))
    res = await gpt.chat.completions.create(
        model="gpt-x",
        messages=[
            {"role": "system", "content": "sys one"},
            {"role": "developer", "content": [{"type": "text", "text": "sys two"}]},
            {"role": "user", "content": [{"type": "text", "text": "part a"}, {"type": "text", "text": "part b"}]},
        ],
    )
    choice = res.choices[0]
    assert choice.message.content == "Hi from gpt" and choice.finish_reason == "stop"
    assert res.id.startswith("chatcmpl-") and res.model == "gpt-x" and res.object == "chat.completion"
    assert res.usage is not None and res.usage.total_tokens == res.usage.prompt_tokens + res.usage.completion_tokens
    (req,) = server.requests
    assert req.api == "openai" and req.system == "sys one\nsys two"
    assert req.last_user_text() == "part a\npart b"


async def test_openai_streaming_text_with_usage(server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    server.script(Reply(text="streamed words arrive here", usage=(20, 4), cache_read_input_tokens=5))
    stream = await gpt.chat.completions.create(
        model="gpt-x",
        messages=[{"role": "user", "content": "x"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed words arrive here"
    assert chunks[0].choices[0].delta.role == "assistant"
    finishing = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishing == ["stop"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (25, 4, 29)
    assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 5
    assert all(c.usage is None for c in chunks[:-1])


async def test_openai_streaming_without_usage(server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    stream = await gpt.chat.completions.create(model="g", messages=[{"role": "user", "content": "x"}], stream=True)
    chunks = [c async for c in stream]
    assert all(c.usage is None and c.choices for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ok"


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_tool_calls(server: ModelServer, gpt: openai.AsyncOpenAI, stream: bool) -> None:
    server.script(
        Reply(tool_calls=[ToolCall("get_weather", NESTED_INPUT), ToolCall("get_weather", {"city": "Oslo"}, id="call_x")]),
        echo_responder,
    )
    messages: list[dict] = [{"role": "user", "content": "weather?"}]
    if stream:
        async with gpt.chat.completions.stream(model="gpt-x", messages=messages, tools=[WEATHER_TOOL_OPENAI]) as s:
            completion = await s.get_final_completion()
    else:
        completion = await gpt.chat.completions.create(model="gpt-x", messages=messages, tools=[WEATHER_TOOL_OPENAI])
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 2
    assert calls[0].id.startswith("call_") and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == NESTED_INPUT
    assert calls[1].id == "call_x" and json.loads(calls[1].function.arguments) == {"city": "Oslo"}

    follow = await gpt.chat.completions.create(
        model="gpt-x",
        messages=[
            *messages,
            choice.message.model_dump(exclude_none=True, exclude={"parsed", "annotations"}),
            {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_x", "content": [{"type": "text", "text": "rainy"}]},
        ],
        tools=[WEATHER_TOOL_OPENAI],
    )
    assert follow.choices[0].message.content == "echo: sunny\nrainy"
    req = server.requests[-1]
    assert req.tool_names == ["get_weather"]
    assert [(r["tool_call_id"], r["content"]) for r in req.tool_results()] == [(calls[0].id, "sunny"), ("call_x", "rainy")]


async def test_openai_raw_tool_call_deltas(server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    server.script(Reply(text="checking", tool_calls=[ToolCall("get_weather", NESTED_INPUT)]))
    stream = await gpt.chat.completions.create(
        model="g", messages=[{"role": "user", "content": "x"}], tools=[WEATHER_TOOL_OPENAI], stream=True
    )
    args, names = "", []
    async for c in stream:
        for tc in c.choices[0].delta.tool_calls or []:
            assert tc.index == 0
            if tc.function and tc.function.name:
                names.append(tc.function.name)
            args += (tc.function.arguments or "") if tc.function else ""
    assert names == ["get_weather"] and json.loads(args) == NESTED_INPUT


# ---- scheduling, routing, logging -------------------------------------------------------------------


async def test_latency_is_recorded_and_non_blocking(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.script(Reply(text="slow", latency=0.3), model="slow-model")
    server.script(Reply(text="fast"), model="fast-model")

    async def ask(model: str) -> str:
        msg = await claude.messages.create(model=model, max_tokens=10, messages=[{"role": "user", "content": "x"}])
        return msg.content[0].text

    slow_task = asyncio.create_task(ask("slow-model"))
    await server.await_requests(1, model="slow-model")
    assert await ask("fast-model") == "fast"
    assert await slow_task == "slow"
    slow, fast = server.requests_for("slow-model")[0], server.requests_for("fast-model")[0]
    assert slow.reply is not None and slow.reply.latency == 0.3
    assert slow.latency >= 0.25
    assert fast.completed_at is not None and slow.completed_at is not None
    assert fast.completed_at < slow.completed_at  # the sleeping request did not block the other one


async def test_per_model_queues(server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI) -> None:
    server.script("front 1", "front 2", model="front-model")
    server.script(Reply(text="back 1"), model="claude-back*")
    server.script("default 1")
    server.responder(lambda req: Reply(text=f"front fallback ({req.api})"), model="front-model")

    async def claude_says(model: str) -> str:
        msg = await claude.messages.create(model=model, max_tokens=10, messages=[{"role": "user", "content": "x"}])
        return msg.content[0].text

    async def gpt_says(model: str) -> str:
        res = await gpt.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}])
        return res.choices[0].message.content or ""

    assert await gpt_says("front-model") == "front 1"
    assert await claude_says("claude-back-opus") == "back 1"
    assert await claude_says("front-model") == "front 2"
    assert await gpt_says("front-model") == "front fallback (openai)"
    assert await claude_says("claude-back-opus") == "ok"  # own route drained: never steals the default queue
    assert await claude_says("someone-else") == "default 1"
    assert await claude_says("someone-else") == "ok"
    assert [r.api for r in server.requests_for("front-model")] == ["openai", "anthropic", "openai"]
    assert len(server.requests_for("claude-back*")) == 2
    assert len(server.requests_for()) == 7
    assert server.pending("front-model") == 0


async def test_default_responder_and_callable_scripts(server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    server.responder(echo_responder)

    async def async_reply(req: Request) -> Reply:
        await asyncio.sleep(0)
        return Reply(text=f"async saw {req.last_user_text()!r}")

    server.script(async_reply)
    texts = []
    for prompt in ["first", "second"]:
        msg = await claude.messages.create(model="any", max_tokens=10, messages=[{"role": "user", "content": prompt}])
        texts.append(msg.content[0].text)
    assert texts == ["async saw 'first'", "echo: second"]


def test_sync_client_from_another_thread_and_wait(server: ModelServer) -> None:
    server.script("from thread")
    result: list[str] = []

    def call() -> None:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        msg = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
        result.append(msg.content[0].text)
        client.close()

    t = threading.Thread(target=call)
    t.start()
    (req,) = server.wait_for_requests(1, timeout=10)
    t.join(10)
    assert result == ["from thread"] and req.model == "m"
    with pytest.raises(TimeoutError):
        server.wait_for_requests(2, timeout=0.05)


def test_subprocess_can_reach_server(server: ModelServer) -> None:
    server.script("hello subprocess")
    code = (
        "import json, os, urllib.request\n"
        "req = urllib.request.Request(os.environ['ANTHROPIC_BASE_URL'] + '/v1/messages', method='POST',\n"
        "    data=json.dumps({'model': 'm', 'max_tokens': 5, 'messages': [{'role': 'user', 'content': 'hi'}]}).encode(),\n"
        "    headers={'content-type': 'application/json', 'x-api-key': os.environ['ANTHROPIC_API_KEY']})\n"
        "print(json.load(urllib.request.urlopen(req))['content'][0]['text'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=server.env(), capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "hello subprocess", out.stderr


async def test_models_probe_and_404(server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI) -> None:
    server.script("x", model="front-model")
    anthropic_ids = [m.id async for m in claude.models.list()]
    openai_ids = [m.id async for m in gpt.models.list()]
    assert anthropic_ids == openai_ids == ["front-model"]
    assert await asyncio.to_thread(_status, urllib.request.Request(server.url + "/", method="HEAD")) == 200
    assert await asyncio.to_thread(_status, urllib.request.Request(server.url + "/")) == 200
    with pytest.raises(anthropic.NotFoundError) as a_err:
        await claude.get("/v1/nope", cast_to=object)
    assert a_err.value.type == "not_found_error"
    with pytest.raises(openai.NotFoundError) as o_err:
        await gpt.embeddings.create(model="e", input="x")
    assert isinstance(o_err.value.body, dict) and o_err.value.body["type"] == "not_found_error"


def test_restart_and_reset() -> None:
    srv = ModelServer().start()
    first_url = srv.url
    srv.script("a")
    srv.reset()
    assert srv.pending() == 0 and srv.requests == []
    srv.stop()
    srv.stop()  # idempotent
    with pytest.raises(RuntimeError):
        _ = srv.url
    srv.start()
    assert srv.url.startswith("http://127.0.0.1:") and first_url
    srv.stop()


def _status(request: urllib.request.Request) -> int:
    with urllib.request.urlopen(request) as response:
        return int(response.status)
