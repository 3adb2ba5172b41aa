"""/audit: recent tool failures, who the gate refused lately, what did not load at start, and the last backup."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bicameral.console.desk import Asked, OwnerCommand
from bicameral.console.times import ago, utc_clock
from bicameral.redaction import scrub
from bicameral.store.tool_calls import ToolCallStore
from bicameral.store.unauthorized import RefusedSender, UnauthorizedStore
from bicameral.types import Clock

FAILURES_SHOWN = 10
FAILURES_AMONG = 10_000  # the failures are looked for among this many latest calls, so /audit stays quick
REFUSED_SHOWN = 10
ERROR_CHARS = 160


@dataclass(frozen=True)
class AuditSources:
    """What /audit reads: the audit tables, what was left out at start (one line each) and the last backup's time."""

    tool_calls: ToolCallStore
    unauthorized: UnauthorizedStore
    not_loaded: Callable[[], Sequence[str]]
    last_backup: Callable[[], float | None] = lambda: None  # the app reads data/last_backup.json
    redact: Callable[[str], str] = scrub
    clock: Clock = time.time


def audit_command(sources: AuditSources) -> OwnerCommand:
    async def audit(asked: Asked) -> str:
        return audit_text(sources)

    return OwnerCommand("audit", "/audit", "tool failures, refused senders, load problems, last backup", audit)


def audit_text(sources: AuditSources) -> str:
    now = sources.clock()
    failures = sources.tool_calls.recent_failures(FAILURES_SHOWN, among=FAILURES_AMONG)
    refused, refused_chats = sources.unauthorized.refused_lately(REFUSED_SHOWN)
    not_loaded = list(sources.not_loaded())
    backup = sources.last_backup()
    lines = [f"Audit at {utc_clock(now, now)}", "", "Tool failures (newest first):"]
    if failures:
        lines += [_failure(row, now, sources.redact) for row in failures]
    else:
        lines.append(f"- none among the last {FAILURES_AMONG} tool calls")
    lines += ["", "Refused by the access policy (newest first; access.json decides who may talk to me):"]
    lines += [_refused(sender, now) for sender in refused] or ["- nobody"]
    if refused_chats > len(refused):
        lines.append(f"- and {refused_chats - len(refused)} more chats")
    lines += ["", "Tools and plugins that did not load:"]
    lines += [f"- {sources.redact(line)}" for line in not_loaded] or ["- none"]
    lines += ["", f"Last backup: {ago(backup, now) if backup is not None else 'no backups made'}"]
    return "\n".join(lines)


def _failure(row: dict[str, object], now: float, redact: Callable[[str], str]) -> str:
    error = " ".join(str(row["error"] or "").split())  # stored redacted; one line here
    error = redact(error)
    if len(error) > ERROR_CHARS:
        error = error[: ERROR_CHARS - 1] + "…"
    at = row["created_at"]
    when = ago(float(at), now) if isinstance(at, (int, float)) else "at an unknown time"
    where = f" in {row['chat']}" if row["chat"] else ""
    return f"- {row['name']}{where}, {when}: {error or 'no error text'}"


def _refused(sender: RefusedSender, now: float) -> str:
    """As the refused digest names them (gate/digest.py): who, where, how many; never what they wrote."""
    messages = f"{sender.count} message{'s' if sender.count != 1 else ''}"
    who = f"{sender.sender_name or 'someone'} (id {sender.sender_id})"
    if sender.title:
        return f"- group “{sender.title}” ({sender.chat}): {messages}, last from {who} {ago(sender.last_at, now)}"
    return f"- {who}: {messages}, last {ago(sender.last_at, now)}"
