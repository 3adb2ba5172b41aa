"""The CLI's stream-json output parsed into small typed events; a malformed line is logged and skipped."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
_PREVIEW = 200


@dataclass(frozen=True)
class Init:
    """`system/init`: a (re)started turn loop, with the session and the tools the model was given."""

    session_id: str
    model: str = ""
    tools: tuple[str, ...] = ()
    mcp_servers: tuple[tuple[str, str], ...] = ()  # (name, status)


@dataclass(frozen=True)
class AssistantText:
    text: str
    session_id: str = ""
    synthetic: bool = False  # written by the CLI itself (an API error), not by the model
    subagent: bool = False  # inside a sub-agent (parent_tool_use_id set), not the main turn


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    subagent: bool = False


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str
    content: str
    is_error: bool = False
    subagent: bool = False


@dataclass(frozen=True)
class ContextUsage:
    """How many input tokens one main-conversation model call carried: the size of the session's context."""

    tokens: int


@dataclass(frozen=True)
class UserReplay:
    """One of our stdin messages echoed back: the CLI has taken it into the conversation."""

    uuid: str
    text: str
    session_id: str = ""


@dataclass(frozen=True)
class ApiRetry:
    attempt: int
    max_retries: int
    delay_ms: int
    status: int | None
    error: str


@dataclass(frozen=True)
class Result:
    """The end of one CLI turn."""

    session_id: str
    is_error: bool
    subtype: str
    text: str = ""
    terminal_reason: str = ""
    api_error_status: int | None = None
    duration_ms: int = 0
    cost_usd: float = 0.0
    num_turns: int = 0


@dataclass(frozen=True)
class ControlRequest:
    """The CLI asks its host something (e.g. a permission); we answer every one."""

    request_id: str
    subtype: str


@dataclass(frozen=True)
class ControlResponse:
    request_id: str
    ok: bool
    error: str = ""


@dataclass(frozen=True)
class Other:
    """A well-formed event this host does not act on (kept for the trace)."""

    type: str
    subtype: str = ""


StreamEvent = (
    Init
    | AssistantText
    | ToolUse
    | ToolResult
    | ContextUsage
    | UserReplay
    | ApiRetry
    | Result
    | ControlRequest
    | ControlResponse
    | Other
)


def parse_line(line: str | bytes) -> list[StreamEvent]:
    """The events in one stdout line; blank, malformed or unexpected lines give [] and a log record."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")
    line = line.strip()
    if not line:
        return []
    try:
        obj = json.loads(line)
    except ValueError:
        log.warning("skipped a malformed stream-json line: %s", preview(line, _PREVIEW))
        return []
    if not isinstance(obj, dict):
        log.warning("skipped a stream-json line that is not an object: %s", preview(line, _PREVIEW))
        return []
    try:
        return _parse(obj)
    except (TypeError, ValueError, AttributeError) as exc:
        log.warning("skipped a stream-json event with an unexpected shape (%s): %s", exc, preview(line, _PREVIEW))
        return []


def _parse(obj: dict[str, Any]) -> list[StreamEvent]:
    kind = _str(obj.get("type"))
    subtype = _str(obj.get("subtype"))
    if kind == "system" and subtype == "init":
        servers = tuple(
            (_str(s.get("name")), _str(s.get("status"))) for s in _list(obj.get("mcp_servers")) if isinstance(s, dict)
        )
        tools = tuple(_str(t) for t in _list(obj.get("tools")))
        return [Init(session_id=_str(obj.get("session_id")), model=_str(obj.get("model")), tools=tools, mcp_servers=servers)]
    if kind == "system" and subtype == "api_retry":
        return [
            ApiRetry(
                attempt=_int(obj.get("attempt")),
                max_retries=_int(obj.get("max_retries")),
                delay_ms=_int(obj.get("retry_delay_ms")),
                status=_opt_int(obj.get("error_status")),
                error=_str(obj.get("error")),
            )
        ]
    if kind == "assistant":
        return _assistant(obj)
    if kind == "user":
        return _user(obj)
    if kind == "result":
        return [
            Result(
                session_id=_str(obj.get("session_id")),
                is_error=bool(obj.get("is_error")),
                subtype=subtype,
                text=_str(obj.get("result")) or "; ".join(_str(e) for e in _list(obj.get("errors"))),
                terminal_reason=_str(obj.get("terminal_reason")),
                api_error_status=_opt_int(obj.get("api_error_status")),
                duration_ms=_int(obj.get("duration_ms")),
                cost_usd=_float(obj.get("total_cost_usd")),
                num_turns=_int(obj.get("num_turns")),
            )
        ]
    if kind == "control_request":
        request = _dict(obj.get("request"))
        return [ControlRequest(request_id=_str(obj.get("request_id")), subtype=_str(request.get("subtype")))]
    if kind == "control_response":
        response = _dict(obj.get("response"))
        return [
            ControlResponse(
                request_id=_str(response.get("request_id")),
                ok=response.get("subtype") == "success",
                error=_str(response.get("error")),
            )
        ]
    if not kind:
        log.warning("skipped a stream-json event without a type: %s", preview(json.dumps(obj), _PREVIEW))
        return []
    return [Other(type=kind, subtype=subtype)]


def _assistant(obj: dict[str, Any]) -> list[StreamEvent]:
    message = _dict(obj.get("message"))
    sub = obj.get("parent_tool_use_id") is not None
    synthetic = message.get("model") == "<synthetic>"
    events: list[StreamEvent] = []
    for block in _list(message.get("content")):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and _str(block.get("text")):
            events.append(AssistantText(_str(block.get("text")), _str(obj.get("session_id")), synthetic, sub))
        elif block.get("type") == "tool_use":
            args = _dict(block.get("input"))
            events.append(ToolUse(_str(block.get("id")), _str(block.get("name")), args, sub))
    usage = _dict(message.get("usage"))
    tokens = sum(_int(usage.get(k)) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    if tokens and not sub and not synthetic:
        events.append(ContextUsage(tokens))
    return events


def _user(obj: dict[str, Any]) -> list[StreamEvent]:
    message = _dict(obj.get("message"))
    content = message.get("content")
    if obj.get("isReplay"):
        return [UserReplay(uuid=_str(obj.get("uuid")), text=content_text(content), session_id=_str(obj.get("session_id")))]
    sub = obj.get("parent_tool_use_id") is not None
    events: list[StreamEvent] = []
    for block in _list(content):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            events.append(
                ToolResult(
                    tool_use_id=_str(block.get("tool_use_id")),
                    content=content_text(block.get("content")),
                    is_error=bool(block.get("is_error")),
                    subagent=sub,
                )
            )
    return events or [Other(type="user")]


def content_text(content: Any) -> str:
    """The text of a message content (a string or a list of blocks); images become `[image]`."""
    if isinstance(content, str):
        return content
    parts = []
    for block in _list(content):
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(_str(block.get("text")))
            elif block.get("type") == "image":
                parts.append("[image]")
            elif block.get("type") == "tool_result":
                parts.append(content_text(block.get("content")))
    return "\n".join(p for p in parts if p)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def preview(text: str, limit: int = 160) -> str:
    """One line of at most `limit` characters, for log lines."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
