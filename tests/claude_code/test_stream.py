"""The stream-json parser: real CLI lines become typed events; anything malformed is logged and skipped."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bicameral.claude_code.stream import (
    ApiRetry,
    AssistantText,
    ContextUsage,
    ControlRequest,
    ControlResponse,
    Init,
    Other,
    Result,
    ToolResult,
    ToolUse,
    UserReplay,
    parse_line,
)

REAL = Path(__file__).parent / "data" / "real_session.stream.jsonl"


def test_a_real_session_parses_into_the_expected_events():
    events = [e for line in REAL.read_text().splitlines() for e in parse_line(line)]
    kinds = [type(e).__name__ for e in events if not isinstance(e, Other)]
    assert kinds == ["Init", "UserReplay", "ToolUse", "ContextUsage", "ToolResult", "AssistantText", "ContextUsage", "Result"]
    assert all(e.tokens > 0 for e in events if isinstance(e, ContextUsage))  # input + cache tokens of each call
    init = next(e for e in events if isinstance(e, Init))
    assert "mcp__bicameral__send_message" in init.tools and ("bicameral", "connected") in init.mcp_servers
    replay = next(e for e in events if isinstance(e, UserReplay))
    assert "hi there" in replay.text and replay.uuid
    use = next(e for e in events if isinstance(e, ToolUse))
    assert use.name == "mcp__bicameral__send_message" and use.input == {"text": "Hello Ada, got it"}
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.tool_use_id == use.id and result.content == "sent message_id=2" and not result.is_error
    done = events[-2] if isinstance(events[-1], Other) else events[-1]
    assert isinstance(done, Result) and not done.is_error and done.subtype == "success" and done.text == "sent"
    assert done.session_id == init.session_id


def test_a_rejected_turn_and_the_cli_written_text():
    synthetic = {
        "type": "assistant",
        "message": {"model": "<synthetic>", "content": [{"type": "text", "text": "Prompt is too long"}]},
        "parent_tool_use_id": None,
        "session_id": "s1",
    }
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "result": "Prompt is too long",
        "api_error_status": 400,
        "terminal_reason": "prompt_too_long",
        "session_id": "s1",
    }
    assert parse_line(json.dumps(synthetic)) == [AssistantText("Prompt is too long", "s1", synthetic=True)]
    [parsed] = parse_line(json.dumps(result))
    assert parsed.is_error and parsed.api_error_status == 400 and parsed.terminal_reason == "prompt_too_long"


def test_interrupts_retries_and_control_messages():
    interrupted = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "session_id": "s",
        "errors": ["aborted"],
    }
    [parsed] = parse_line(json.dumps(interrupted))
    assert parsed.subtype == "error_during_execution" and parsed.text == "aborted"
    retry = {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 2,
        "max_retries": 10,
        "retry_delay_ms": 1195,
        "error_status": 401,
        "error": "authentication_failed",
    }
    assert parse_line(json.dumps(retry)) == [ApiRetry(2, 10, 1195, 401, "authentication_failed")]
    ask = {"type": "control_request", "request_id": "r1", "request": {"subtype": "can_use_tool", "tool_name": "Bash"}}
    assert parse_line(json.dumps(ask)) == [ControlRequest("r1", "can_use_tool")]
    answer = {"type": "control_response", "response": {"subtype": "success", "request_id": "r2", "response": {}}}
    assert parse_line(json.dumps(answer)) == [ControlResponse("r2", True)]


def test_tool_errors_and_sub_agent_events_are_marked():
    line = {
        "type": "user",
        "parent_tool_use_id": "toolu_parent",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "<tool_use_error>boom</tool_use_error>", "is_error": True}
            ],
        },
    }
    assert parse_line(json.dumps(line)) == [ToolResult("t1", "<tool_use_error>boom</tool_use_error>", True, subagent=True)]


def test_unknown_event_types_are_kept_as_other():
    assert parse_line('{"type":"command_lifecycle","state":"queued"}') == [Other("command_lifecycle")]
    assert parse_line('{"type":"system","subtype":"hook_started"}') == [Other("system", "hook_started")]


def test_malformed_lines_are_logged_and_skipped(caplog):
    caplog.set_level(logging.WARNING, logger="bicameral.claude_code.stream")
    for line in ['{"type": "assistant", "message": ', "not json at all", "[1, 2, 3]", '"a string"', '{"no_type": 1}']:
        assert parse_line(line) == []
    assert parse_line("") == [] and parse_line(b"   \n") == []
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 5


def test_fields_of_the_wrong_type_do_not_crash():
    odd = {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": 5, "name": None, "input": "x"}, "junk", None]}}
    assert parse_line(json.dumps(odd)) == [ToolUse("5", "", {})]
    odd_result = {"type": "result", "is_error": "yes", "duration_ms": "fast", "total_cost_usd": None, "api_error_status": True}
    [parsed] = parse_line(json.dumps(odd_result))
    assert parsed.is_error and parsed.duration_ms == 0 and parsed.api_error_status is None
    assert parse_line(json.dumps({"type": "user", "message": "flat"})) == [Other("user")]
    assert parse_line(json.dumps({"type": "system", "subtype": "init", "tools": "all", "mcp_servers": [1]})) == [Init("")]


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(["type", "text", "content", "input", "is_error", "tool_use_id"]), children, max_size=4),
    ),
    max_leaves=20,
)
_EVENTS = st.fixed_dictionaries(
    {"type": st.sampled_from(["assistant", "user", "result", "system", "control_request", "control_response", "x"])},
    optional={
        "subtype": st.sampled_from(["init", "api_retry", "success", "error_during_execution"]),
        "message": st.one_of(_JSON, st.fixed_dictionaries({"content": st.lists(_JSON, max_size=4)})),
        "isReplay": st.booleans(),
        "parent_tool_use_id": _JSON,
        "result": _JSON,
        "is_error": _JSON,
        "tools": _JSON,
        "mcp_servers": _JSON,
        "request": _JSON,
        "response": _JSON,
        "errors": _JSON,
    },
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), _JSON.map(json.dumps), _EVENTS.map(json.dumps)))
def test_no_line_can_crash_the_parser(line):
    assert isinstance(parse_line(line), list)
