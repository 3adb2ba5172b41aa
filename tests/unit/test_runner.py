"""The native agent loop and its circuit breakers, driven by an in-process scripted model."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from bicameral.agent.breakers import Breakers
from bicameral.agent.runner import NativeRunner
from bicameral.events import ActionResult
from bicameral.models.base import Message, ModelError, Stop, TextDelta, ToolCall, ToolResultBlock, Usage
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.registry import ToolRegistry


class ScriptedModel:
    """Plays back a list of turns: a str is a final text, a list of (name, input) is tool calls."""

    name = "scripted"

    def __init__(self, *turns, error: ModelError | None = None) -> None:
        self.turns = list(turns)
        self.calls: list[list[Message]] = []
        self.error = error

    async def stream(self, system, messages, tools, max_tokens):
        self.calls.append(list(messages))
        if self.error is not None:
            raise self.error
        turn = self.turns.pop(0)
        yield Usage(input_tokens=10, output_tokens=5)
        if isinstance(turn, str):
            yield TextDelta(turn)
            yield Stop("end_turn")
        else:
            for i, (name, args) in enumerate(turn):
                yield ToolCall(id=f"t{len(self.calls)}-{i}", name=name, input=args)
            yield Stop("tool_use")


class EchoArgs(BaseModel):
    text: str


class Echo(Tool):
    name = "echo"
    description = "echo"
    args_model = EchoArgs

    async def run(self, args, ctx):
        return ToolResult(args.text)


class Broken(Tool):
    name = "broken"
    description = "always fails"
    args_model = EchoArgs

    async def run(self, args, ctx):
        raise RuntimeError("disk on fire")


def _ctx(tmp_path: Path) -> ToolContext:
    async def perform(action):
        return ActionResult(ok=True)

    return ToolContext(chat="test:1", turn_id="t", data_dir=tmp_path, perform=perform)


def _runner(model, **kwargs) -> NativeRunner:
    return NativeRunner(model, ToolRegistry([Echo(), Broken()]), **kwargs)


async def test_loop_runs_tools_then_returns_final_text(tmp_path):
    model = ScriptedModel([("echo", {"text": "a"})], "done")
    result = await _runner(model).run("sys", [Message.user("hi")], _ctx(tmp_path))
    assert result.text == "done"
    assert result.iterations == 2
    results = [b for b in model.calls[1][-1].content if isinstance(b, ToolResultBlock)]
    assert results[0].content == "a" and not results[0].is_error
    assert result.usage.input_tokens == 20


async def test_three_consecutive_tool_errors_trip_the_breaker(tmp_path):
    model = ScriptedModel(*[[("broken", {"text": str(i)})] for i in range(5)], "never")
    result = await _runner(model).run("sys", [Message.user("hi")], _ctx(tmp_path))
    assert result.stop_reason and "3 tool errors" in result.stop_reason
    assert len(model.calls) == 3
    assert result.messages[-1].role == "assistant"


async def test_the_same_call_repeated_trips_the_breaker(tmp_path):
    model = ScriptedModel([("echo", {"text": "x"})], [("echo", {"text": "x"})], "never")
    result = await _runner(model).run("sys", [Message.user("hi")], _ctx(tmp_path))
    assert result.stop_reason and "repeated" in result.stop_reason
    assert len(model.calls) == 2


async def test_max_iterations_stops_the_loop(tmp_path):
    model = ScriptedModel(*[[("echo", {"text": str(i)})] for i in range(10)])
    result = await _runner(model, max_iterations=3).run("sys", [Message.user("hi")], _ctx(tmp_path))
    assert result.stop_reason == "it hit the step limit"
    assert len(model.calls) == 3


async def test_injected_messages_reach_the_loop_at_a_tool_boundary(tmp_path):
    model = ScriptedModel([("echo", {"text": "a"})], "ok")
    injected = iter(['<msg id="9">also this</msg>'])
    result = await _runner(model).run("sys", [Message.user("hi")], _ctx(tmp_path), lambda: next(injected, None))
    assert "also this" in model.calls[1][-1].model_dump_json()
    assert result.text == "ok"


async def test_model_error_is_returned_not_raised(tmp_path):
    model = ScriptedModel(error=ModelError("rate_limit", "slow down", retryable=True))
    result = await _runner(model).run("sys", [Message.user("hi")], _ctx(tmp_path))
    assert result.error is not None and result.error.kind == "rate_limit"


async def test_bad_tool_arguments_become_error_results(tmp_path):
    registry = ToolRegistry([Echo()])
    ctx = _ctx(tmp_path)
    assert (await registry.execute("echo", {"txt": 1}, ctx)).is_error
    assert (await registry.execute("echo", {"_raw": "{oops"}, ctx)).is_error
    unknown = await registry.execute("rm_rf", {}, ctx)
    assert unknown.is_error and "unknown tool" in unknown.content
    crashed = await registry.execute("echo", {"text": "fine"}, ctx)
    assert crashed.content == "fine"


def test_error_window_trips_even_below_the_count():
    now = [0.0]
    breakers = Breakers(max_errors=10, window_seconds=60, clock=lambda: now[0])
    assert breakers.after_call("x", True) is None
    now[0] = 61
    assert breakers.after_call("x", True) is not None


def test_a_success_resets_the_consecutive_count():
    breakers = Breakers(max_errors=3)
    breakers.after_call("x", True)
    breakers.after_call("x", True)
    breakers.after_call("x", False)
    assert breakers.after_call("x", True) is None
