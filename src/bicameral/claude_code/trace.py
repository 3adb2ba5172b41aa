"""`bicameral trace`: a captured Claude Code session replayed as a readable transcript, or followed live."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from bicameral.claude_code.capture import META_SUFFIX, STREAM_SUFFIX
from bicameral.claude_code.stream import (
    ApiRetry,
    AssistantText,
    ControlRequest,
    ControlResponse,
    Init,
    Result,
    ToolResult,
    ToolUse,
    UserReplay,
    parse_line,
)

Write = Callable[[str], None]


class TraceError(Exception):
    """Nothing to show; the message says why."""


@dataclass(frozen=True)
class SessionFile:
    session_id: str
    path: Path
    label: str
    size: int
    modified: float
    live: bool


def list_sessions(root: Path) -> list[SessionFile]:
    """Every captured session under `root`, most recently written first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.glob(f"*{STREAM_SUFFIX}"):
        session_id = path.name[: -len(STREAM_SUFFIX)]
        meta = _meta(root / f"{session_id}{META_SUFFIX}")
        stat = path.stat()
        found.append(
            SessionFile(
                session_id=session_id,
                path=path,
                label=str(meta.get("label") or "?"),
                size=stat.st_size,
                modified=stat.st_mtime,
                live=_running(meta.get("pid"), session_id),
            )
        )
    return sorted(found, key=lambda s: s.modified, reverse=True)


def find_session(root: Path, session: str | None) -> SessionFile:
    """The session named by id (a unique prefix is enough), or the most recent one."""
    sessions = list_sessions(root)
    if not sessions:
        raise TraceError(f"no captured Claude Code sessions under {root}")
    if not session:
        return sessions[0]
    matches = [s for s in sessions if s.session_id.startswith(session)]
    if not matches:
        raise TraceError(f"no captured session starts with {session!r}; `bicameral trace --list` shows them")
    if len(matches) > 1:
        raise TraceError(f"{session!r} matches {len(matches)} sessions; give more of the id")
    return matches[0]


def format_listing(sessions: list[SessionFile]) -> list[str]:
    lines = []
    for s in sessions:
        when = datetime.fromtimestamp(s.modified).strftime("%Y-%m-%d %H:%M:%S")
        mark = "live" if s.live else "    "
        lines.append(f"{s.session_id}  {mark}  {when}  {s.size:>9,} B  {s.label}")
    return lines


def render_line(line: str, max_chars: int = 400) -> list[str]:
    """The readable lines for one captured stdout line (malformed lines are shown as such)."""
    raw = line.strip()
    if not raw:
        return []
    try:
        obj = json.loads(raw)
    except ValueError:
        return [f"⚠ malformed line: {_cut(raw, max_chars)}"]
    if not isinstance(obj, dict):
        return [f"⚠ malformed line: {_cut(raw, max_chars)}"]
    stamp = _stamp(obj.get("timestamp"))
    out = []
    for event in parse_line(raw):
        text = _describe(event, max_chars)
        if text:
            out.append(f"{stamp}{text}")
    return out


def render(path: Path, write: Write, max_chars: int = 400) -> int:
    """Write the whole session; returns the byte offset reached (where following continues)."""
    with path.open("rb") as handle:
        for raw in handle:
            for line in render_line(raw.decode("utf-8", errors="replace"), max_chars):
                write(line)
        return handle.tell()


def follow(
    path: Path,
    write: Write,
    max_chars: int = 400,
    *,
    offset: int = 0,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Keep rendering lines appended after `offset` until `stop()`; a partial last line waits for its end."""
    buffer = b""
    while not stop():
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
        if chunk:
            offset += len(chunk)
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                for line in render_line(raw.decode("utf-8", errors="replace"), max_chars):
                    write(line)
        else:
            sleep(poll)
    return offset


def _describe(event: object, max_chars: int) -> str:
    if isinstance(event, Init):
        servers = ", ".join(f"{name}: {status}" for name, status in event.mcp_servers) or "none"
        return f"── turn starts · model {event.model} · {len(event.tools)} tools · mcp {servers}"
    if isinstance(event, UserReplay):
        return f"▶ user     {_cut(event.text, max_chars)}"
    if isinstance(event, AssistantText):
        who = "⚠ cli     " if event.synthetic else ("  sub-text " if event.subagent else "◆ text     ")
        return who + _cut(event.text, max_chars)
    if isinstance(event, ToolUse):
        args = json.dumps(dict(event.input), ensure_ascii=False, default=str)
        return f"{'  ' if event.subagent else ''}→ tool     {event.name}({_cut(args, max_chars)})"
    if isinstance(event, ToolResult):
        mark = "✗ error   " if event.is_error else "✓ result  "
        return mark + _cut(event.content, max_chars)
    if isinstance(event, ApiRetry):
        return f"↻ retry    attempt {event.attempt}/{event.max_retries} after {event.delay_ms} ms ({event.status} {event.error})"
    if isinstance(event, Result):
        flag = " ERROR" if event.is_error else ""
        cost = f" · ${event.cost_usd:.4f}" if event.cost_usd else ""
        tail = f" | {_cut(event.text, max_chars)}" if event.text else ""
        return f"■ done     {event.subtype}{flag} · {event.duration_ms / 1000:.1f}s{cost}{tail}"
    if isinstance(event, ControlRequest):
        return f"⇄ asks     {event.subtype}"
    if isinstance(event, ControlResponse):
        return f"⇄ answer   {'ok' if event.ok else 'error ' + event.error}"
    return ""


def _stamp(value: object) -> str:
    if not isinstance(value, str):
        return "         "
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone().strftime("%H:%M:%S ")
    except ValueError:
        return "         "


def _cut(text: str, max_chars: int) -> str:
    flat = " ⏎ ".join(part for part in str(text).splitlines() if part.strip()) or str(text)
    return flat if max_chars <= 0 or len(flat) <= max_chars else flat[: max_chars - 1] + "…"


def _meta(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _running(pid: object, session_id: str) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        return any(session_id in part for part in psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        return False
