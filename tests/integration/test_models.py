"""AnthropicModel and OpenAIModel against the scripted fake model server, over real HTTP."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bicameral.app import model_config
from bicameral.config import Settings
from bicameral.models import build_model, describe, ping
from bicameral.models.anthropic import AnthropicModel
from bicameral.models.base import (
    ImageBlock,
    Message,
    Model,
    ModelError,
    Stop,
    TextBlock,
    TextDelta,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
    complete,
    parse_tool_input,
)
from bicameral.models.openai import OpenAIModel
from tests.fakes.model_server import ModelServer, Reply
from tests.fakes.model_server import ToolCall as ScriptedCall

API_KEY = "sk-test-SECRET-do-not-leak-0123456789"
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolSpec(name="clock", description="The time", input_schema={"type": "object", "properties": {}})
NESTED_INPUT = {"city": "Zürich", "opts": {"units": "metric", "days": [1, 2, 3]}, "note": 'a "quoted" value'}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))

Factory = Callable[..., Model]


@pytest.fixture
def server() -> Iterator[ModelServer]:
    """A fresh fake server per test."""
    with ModelServer() as srv:
        yield srv


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data dir holding one image at attachments/pic.png."""
    (tmp_path / "attachments").mkdir()
    (tmp_path / "attachments" / "pic.png").write_bytes(PNG)
    return tmp_path


@pytest.fixture
async def closing() -> AsyncIterator[list[Any]]:
    """Models appended here have their connection pools closed after the test."""
    models: list[Any] = []
    yield models
    for model in models:
        await model.aclose()


@pytest.fixture(params=["anthropic", "openai"])
def make(request: pytest.FixtureRequest, server: ModelServer, data_dir: Path, closing: list[Any]) -> Factory:
    """Build the adapter under test, pointed at the fake server."""

    def factory(max_retries: int = 0, api_key: str | None = API_KEY, base_url: str | None = None) -> Model:
        cls: Any = AnthropicModel if request.param == "anthropic" else OpenAIModel
        url = base_url or (server.url if request.param == "anthropic" else server.openai_url)
        model = cls(
            "test-model", api_key=api_key, base_url=url, max_retries=max_retries, timeout=10.0, data_dir=data_dir
        )
        closing.append(model)
        return model

    factory.api = request.param  # type: ignore[attr-defined]
    return factory


async def _events(model: Model, messages: list[Message], tools: tuple[ToolSpec, ...] = (), system: str = "Be brief.") -> list:
    return [e async for e in model.stream(system, messages, list(tools), 256)]


# ---- streaming ----------------------------------------------------------------------------------


async def test_streams_text_deltas_then_usage_and_stop(make: Factory, server: ModelServer) -> None:
    server.script(Reply(chunks=["Hel", "lo, ", "world"], usage=(12, 3)))
    events = await _events(make(), [Message.user("hi")])
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo, ", "world"]
    assert events[-1] == Stop("end_turn")
    (usage,) = [e for e in events if isinstance(e, Usage)]
    assert (usage.input_tokens, usage.output_tokens) == (12, 3)
    (req,) = server.requests
    assert req.stream and req.model == "test-model" and req.system == "Be brief."
    assert req.last_user_text() == "hi"


async def test_tool_call_round_trip(make: Factory, server: ModelServer) -> None:
    server.script(Reply(text="Let me check.", tool_calls=[ScriptedCall("get_weather", NESTED_INPUT)]), Reply("Sunny."))
    model = make()
    history = [Message.user("Weather in Zürich?")]
    first = await complete(model, "sys", history, [WEATHER, CLOCK], 256)
    assert first.stop_reason == "tool_use" and first.text == "Let me check."
    (call,) = first.tool_calls
    assert call.name == "get_weather" and call.input == NESTED_INPUT and call.id

    history += [
        first.as_message(),
        Message(role="user", content=[ToolResultBlock(tool_use_id=call.id, content="21C, sunny")]),
    ]
    second = await complete(model, "sys", history, [WEATHER, CLOCK], 256)
    assert second.text == "Sunny." and second.stop_reason == "end_turn" and not second.tool_calls

    req = server.requests[1]
    assert req.tool_results()[0]["id"] == call.id and req.tool_results()[0]["content"] == "21C, sunny"
    assert req.tool_names == ["get_weather", "clock"]
    assistant = [m for m in req.messages if m["role"] == "assistant"][-1]
    if make.api == "anthropic":  # type: ignore[attr-defined]
        (use,) = [b for b in assistant["content"] if b["type"] == "tool_use"]
        assert use == {"type": "tool_use", "id": call.id, "name": "get_weather", "input": NESTED_INPUT}
    else:
        (tc,) = assistant["tool_calls"]
        assert tc["id"] == call.id and tc["function"]["name"] == "get_weather"
        assert json.loads(tc["function"]["arguments"]) == NESTED_INPUT


async def test_tool_error_results_are_flagged(make: Factory, server: ModelServer) -> None:
    messages = [
        Message.user("go"),
        Message(role="assistant", content=[ToolUseBlock(id="t1", name="clock", input={})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="boom", is_error=True)]),
    ]
    await _events(make(), messages, (CLOCK,))
    (req,) = server.requests
    if make.api == "anthropic":  # type: ignore[attr-defined]
        assert req.tool_results() == [{"tool_use_id": "t1", "id": "t1", "content": "boom", "is_error": True}]
    else:
        assert req.messages[-1] == {"role": "tool", "tool_call_id": "t1", "content": "ERROR: boom"}


async def test_usage_reports_cache_fields(make: Factory, server: ModelServer) -> None:
    server.script(Reply(text="x", usage=(100, 5), cache_read_input_tokens=80, cache_creation_input_tokens=20))
    result = await complete(make(), "sys", [Message.user("hi")], [], 64)
    if make.api == "anthropic":  # type: ignore[attr-defined]
        assert result.usage == Usage(input_tokens=100, output_tokens=5, cache_read_tokens=80, cache_write_tokens=20)
    else:
        # OpenAI folds cached tokens into prompt_tokens; the adapter splits them back out.
        assert result.usage.cache_read_tokens == 80 and result.usage.output_tokens == 5
        assert result.usage.input_tokens == 100 + 20


# ---- Anthropic request shape ------------------------------------------------------------------


async def test_anthropic_cache_control_on_system_last_tool_and_last_block(
    server: ModelServer, data_dir: Path, closing: list[Any]
) -> None:
    model = AnthropicModel(
        "claude-test", api_key=API_KEY, base_url=server.url, max_retries=0, timeout=10.0, data_dir=data_dir
    )
    closing.append(model)
    messages = [
        Message.user("first"),
        Message.assistant("answer"),
        Message(role="user", content=[TextBlock(text="second"), TextBlock(text="third")]),
    ]
    await complete(model, "You are a test.", messages, [WEATHER, CLOCK], 64)
    raw = server.requests[0].raw
    ephemeral = {"type": "ephemeral"}
    assert raw["system"] == [{"type": "text", "text": "You are a test.", "cache_control": ephemeral}]
    assert "cache_control" not in raw["tools"][0] and raw["tools"][1]["cache_control"] == ephemeral
    assert raw["messages"][-1]["content"][-1] == {"type": "text", "text": "third", "cache_control": ephemeral}
    # Exactly three breakpoints: earlier blocks stay unmarked.
    assert json.dumps(raw).count('"cache_control"') == 3


async def test_anthropic_merges_consecutive_same_role_messages(
    server: ModelServer, data_dir: Path, closing: list[Any]
) -> None:
    model = AnthropicModel(
        "claude-test", api_key=API_KEY, base_url=server.url, max_retries=0, timeout=10.0, data_dir=data_dir
    )
    closing.append(model)
    messages = [Message.user("one"), Message.user("two"), Message.assistant(""), Message.user("three")]
    await complete(model, "", messages, [], 64)
    raw = server.requests[0].raw
    assert "system" not in raw
    # The empty assistant turn is dropped (the API rejects empty text), so all user text merges.
    assert [m["role"] for m in raw["messages"]] == ["user"]
    assert [b["text"] for b in raw["messages"][0]["content"]] == ["one", "two", "three"]


# ---- images ---------------------------------------------------------------------------------------


async def test_images_are_sent_inline_and_missing_ones_become_text(make: Factory, server: ModelServer) -> None:
    message = Message(
        role="user",
        content=[
            TextBlock(text="What is this?"),
            ImageBlock(path="attachments/pic.png", media_type="image/png"),
            ImageBlock(path="attachments/gone.jpg"),
            ImageBlock(path="../outside.png"),
        ],
    )
    await _events(make(), [message])
    content = server.requests[0].messages[-1]["content"]
    encoded = base64.b64encode(PNG).decode()
    if make.api == "anthropic":  # type: ignore[attr-defined]
        assert content[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}}
        texts = [b["text"] for b in content if b["type"] == "text"]
    else:
        assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}
        texts = [p["text"] for p in content if p["type"] == "text"]
    assert "[image unavailable: attachments/gone.jpg]" in texts
    # Paths escaping the data dir are never read.
    assert "[image unavailable: ../outside.png]" in texts


# ---- retries and errors ---------------------------------------------------------------------------


async def test_rate_limit_is_retried_after_the_asked_delay(make: Factory, server: ModelServer) -> None:
    server.script(Reply(error_status=429, retry_after=0.01), Reply(text="after retry"))
    result = await complete(make(max_retries=2), "sys", [Message.user("hi")], [], 64)
    assert result.text == "after retry"
    assert [r.status for r in await server.await_completed(2)] == [429, 200]


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [(529, "overloaded", True), (500, "server", True), (429, "rate_limit", True), (400, "bad_request", False)],
)
async def test_final_errors_map_to_model_error_kinds(
    make: Factory, server: ModelServer, status: int, kind: str, retryable: bool
) -> None:
    server.script(Reply(error_status=status, error_message="scripted failure"))
    with pytest.raises(ModelError) as caught:
        await complete(make(max_retries=0), "sys", [Message.user("hi")], [], 64)
    assert caught.value.kind == kind and caught.value.retryable is retryable
    assert f"HTTP {status}" in str(caught.value) and "scripted failure" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 500])
async def test_api_key_never_appears_in_errors(make: Factory, server: ModelServer, status: int) -> None:
    server.script(Reply(error_status=status, error_message=f"bad key {API_KEY} rejected"))
    with pytest.raises(ModelError) as caught:
        await complete(make(max_retries=0), "sys", [Message.user("hi")], [], 64)
    assert API_KEY not in str(caught.value) and API_KEY not in repr(caught.value.args)
    # No underlying exception (whose text could echo the body) rides along in tracebacks.
    error = caught.value
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    if status in (401, 403):
        assert caught.value.kind == "auth" and not caught.value.retryable


async def test_dropped_stream_is_a_connection_error(make: Factory, server: ModelServer) -> None:
    server.script(Reply(chunks=["a", "b", "c", "d", "e", "f"], abort_after_events=4))
    with pytest.raises(ModelError) as caught:
        await _events(make(max_retries=0), [Message.user("hi")])
    assert caught.value.kind == "connection" and caught.value.retryable


@pytest.mark.parametrize(
    ("malformed", "kind", "says"),
    [
        ("html", "server", "text/html instead of an event stream"),
        ("truncated_json", "server", "malformed reply"),
        ("early_end", "connection", "ended before the reply was complete"),
    ],
)
async def test_garbage_with_status_200_is_a_model_error(
    make: Factory, server: ModelServer, malformed: str, kind: str, says: str
) -> None:
    server.script(Reply(text="never seen in full", malformed=malformed))  # type: ignore[arg-type]
    with pytest.raises(ModelError) as caught:
        await complete(make(max_retries=0), "sys", [Message.user("hi")], [], 64)
    assert caught.value.kind == kind and caught.value.retryable and says in str(caught.value)
    assert API_KEY not in str(caught.value)


async def test_openai_stream_without_choices_is_a_model_error(server: ModelServer, data_dir: Path, closing: list[Any]) -> None:
    model = OpenAIModel("gpt-test", api_key=API_KEY, base_url=server.openai_url, max_retries=0, timeout=10.0, data_dir=data_dir)
    closing.append(model)
    server.script(Reply(text="lost", malformed="empty_choices"))
    with pytest.raises(ModelError) as caught:
        await complete(model, "sys", [Message.user("hi")], [], 64)
    assert caught.value.kind == "server" and "without any choices" in str(caught.value)


async def test_unreachable_server_is_a_connection_error(make: Factory) -> None:
    with pytest.raises(ModelError) as caught:
        await _events(make(base_url="http://127.0.0.1:9"), [Message.user("hi")])
    assert caught.value.kind == "connection" and caught.value.retryable


async def test_missing_key_without_base_url_is_an_auth_error(data_dir: Path) -> None:
    for cls, var in ((AnthropicModel, "ANTHROPIC_API_KEY"), (OpenAIModel, "OPENAI_API_KEY")):
        model = cls("m", api_key=None, base_url=None, max_retries=0, timeout=5.0, data_dir=data_dir)
        with pytest.raises(ModelError) as caught:
            await _events(model, [Message.user("hi")])
        assert caught.value.kind == "auth" and var in str(caught.value)


async def test_dummy_key_is_fine_with_a_base_url(make: Factory, server: ModelServer) -> None:
    result = await complete(make(api_key=None), "sys", [Message.user("hi")], [], 64)
    assert result.text == "ok"


def test_unparseable_tool_arguments_are_kept_raw() -> None:
    assert parse_tool_input('{"city": "Par') == {"_raw": '{"city": "Par'}
    assert parse_tool_input("[1]") == {"_raw": "[1]"}
    assert parse_tool_input("") == {} and parse_tool_input('{"a": 1}') == {"a": 1}


# ---- build_model / describe / ping ----------------------------------------------------------------


async def test_build_model_and_ping(server: ModelServer, tmp_path: Path, closing: list[Any]) -> None:
    settings = _settings(
        tmp_path,
        anthropic_api_key=SecretStr(API_KEY),
        anthropic_base_url=server.url,
        openai_api_key=SecretStr(API_KEY),
        openai_base_url=server.openai_url,
        model_max_retries=0,
    )
    claude = build_model("anthropic:claude-test", model_config(settings))
    gpt = build_model("openai:gpt-test", model_config(settings))
    closing += [claude, gpt]
    assert isinstance(claude, AnthropicModel) and claude.name == "anthropic:claude-test"
    assert isinstance(gpt, OpenAIModel) and gpt.name == "openai:gpt-test"
    assert await ping(claude) is None and await ping(gpt) is None
    assert all(r.raw.get("max_tokens") == 1 for r in server.requests)

    server.script(Reply(error_status=401, error_message="invalid x-api-key"))
    problem = await ping(claude)
    assert problem is not None and problem.startswith("auth:") and API_KEY not in problem

    with pytest.raises(ValueError, match="executor"):
        build_model("claude-code:sonnet", model_config(settings))
    assert describe("anthropic:claude-test") == "Anthropic claude-test"
    assert "llama.cpp" in describe("local")


def test_build_local_model(tmp_path: Path) -> None:
    from bicameral.models.local import DEFAULT_GGUF, LocalModel

    settings = _settings(tmp_path, local_context_tokens=1024)
    model = build_model("local", model_config(settings))
    assert isinstance(model, LocalModel) and model.context_tokens == 1024
    assert model.model_path is None or model.model_path.name == DEFAULT_GGUF
    custom = build_model("local:/models/other.gguf", model_config(settings))
    assert isinstance(custom, LocalModel) and custom.model_path == Path("/models/other.gguf")


def _settings(tmp_path: Path, **values: Any) -> Settings:
    """Settings from these values and defaults only (no env, .env or toml)."""
    return Settings.model_construct(data_dir=tmp_path / "data", **values)


async def test_missing_local_model_file_is_unavailable(tmp_path: Path) -> None:
    from bicameral.models.local import LocalModel

    model = LocalModel(tmp_path / "absent.gguf", context_tokens=512)
    with pytest.raises(ModelError) as caught:
        await _events(model, [Message.user("hi")])
    assert caught.value.kind == "unavailable" and "bicameral[local]" in str(caught.value)


async def test_a_shared_transport_is_used_and_left_open(server: ModelServer, tmp_path: Path) -> None:
    from bicameral.net import Proxies
    from bicameral.net.client import ServiceTransport

    settings = _settings(tmp_path, anthropic_base_url=server.url, openai_base_url=server.openai_url)
    shared = ServiceTransport(Proxies.none())
    for ref in ("anthropic:claude-test", "openai:gpt-test"):
        model: Any = build_model(ref, model_config(settings), transport=shared)
        assert (await complete(model, "", [Message.user("hi")], [], 8)).text == "ok"
        await model.aclose()
        assert list(shared.in_flight()) == [(None, False)]  # its pools, still open for the next one
    await shared.aclose()
    assert len(server.requests) == 2


async def test_an_error_event_mid_stream_maps_by_its_type(make: Factory, server: ModelServer) -> None:
    overloaded = "overloaded_error" if make.api == "anthropic" else "overloaded"  # type: ignore[attr-defined]
    server.script(Reply(text="one two three four", error_after_events=3, error_type=overloaded, error_message="Overloaded"))
    with pytest.raises(ModelError) as caught:
        await _events(make(max_retries=0), [Message.user("hi")])
    assert (caught.value.kind, caught.value.retryable) == ("overloaded", True)
    assert "mid-stream" in str(caught.value) and "Overloaded" in str(caught.value)
