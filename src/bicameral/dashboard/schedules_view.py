"""The schedules page's rows: every active reminder and scheduled task, the soonest first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from bicameral.store.schedules import Schedule

SHOWN = 500


def schedule_rows(active: Callable[[], Sequence[Schedule]]) -> list[tuple[str, str, str, str]]:
    """(next time in UTC, chat, kind and rule, what it says). The owner sees every chat's (as the owner's read-only SQL
    does); the follow-ups the assistant sets itself are left out."""
    rows = []
    for schedule in list(active())[:SHOWN]:
        if schedule.kind == "followup":
            continue
        when = "—" if schedule.next_due is None else f"{datetime.fromtimestamp(schedule.next_due, UTC):%Y-%m-%d %H:%M} UTC"
        kind = {"text": "reminder", "task": "task"}.get(schedule.kind, schedule.kind)
        rule = f"{kind}, {schedule.cron} ({schedule.tz})" if schedule.cron else kind
        rows.append((when, schedule.chat, rule, schedule.body))
    return rows
