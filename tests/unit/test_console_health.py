"""/health's and /audit's reading and wording: the store queries they use, the data dir's size, memory, times."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bicameral.console.audit import AuditSources, audit_text
from bicameral.console.health import DiskUse, HealthSources, disk_use, health_text, process_memory, size
from bicameral.console.times import ago, ahead, span, utc_clock
from bicameral.events import Inbound, Sender, SendText
from bicameral.redaction import Redactor
from bicameral.store import Stores
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import Task, TaskState

NOON = 1_800_000_000.0  # 2027-01-15 08:00 UTC
HOUR = 3600.0


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0 s"), (59.9, "59 s"), (60, "1 min"), (3599, "59 min"), (3600, "1 h"), (3 * HOUR + 300, "3 h 5 min"),
     (86400, "1 day"), (2 * 86400 + 4 * HOUR + 59, "2 days 4 h"), (-5, "0 s")],
)
def test_span(seconds: float, said: str) -> None:
    assert span(seconds) == said


def test_times_say_how_long_ago_or_ahead_and_the_utc_clock() -> None:
    assert utc_clock(NOON - 120, NOON) == "07:58 UTC"
    assert utc_clock(NOON - 2 * 86400, NOON) == "2027-01-13 08:00 UTC"
    assert ago(NOON - 120, NOON) == "2 min ago (07:58 UTC)"
    assert ago(NOON, NOON) == "just now (08:00 UTC)"
    assert ago(None, NOON) == "never"
    assert ahead(NOON + 12 * 60, NOON) == "in 12 min (08:12 UTC)"
    assert ahead(NOON - 60, NOON) == "now (due 07:59 UTC)"


def test_sizes() -> None:
    assert [size(n) for n in (0, 812, 3482, 61_027_123, 5 << 30)] == ["0 B", "812 B", "3.4 KiB", "58.2 MiB", "5.0 GiB"]


def test_process_memory_from_proc_and_without_it(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t   62464 kB\nVmRSS:\t   59596 kB\n", encoding="ascii")
    assert process_memory(status) == "58.2 MiB resident (peak 61.0 MiB)"
    assert process_memory(tmp_path / "missing").startswith("peak ")
    if Path("/proc/self/status").exists():
        assert process_memory().endswith(")") and "resident (peak" in process_memory()


def test_disk_use_counts_files_without_following_links_and_stops_at_its_bound(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    (data / "bicameral.db").write_bytes(b"x" * 10_000)
    (data / "logs" / "bicameral.log").write_bytes(b"y" * 5000)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"z" * 1_000_000)
    os.symlink(outside, data / "link")
    use = disk_use(data)
    assert use.files == 3  # the two files and the link itself, never what it points at
    assert 15_000 <= use.used < 1_000_000 and use.complete
    assert use.free is not None and use.total is not None and 0 < use.free <= use.total
    for i in range(20):
        (data / f"f{i}").write_bytes(b"")
    bounded = disk_use(data, max_entries=10)
    assert not bounded.complete and bounded.files <= 10


@pytest.fixture
def stores(tmp_path: Path):
    opened = Stores.open(tmp_path / "bicameral.db", redact=Redactor(["hunter2-secret"]))
    yield opened
    opened.close()


def _inbound(stores: Stores, chat: str, text: str, at: float) -> int | None:
    stores.messages._clock = lambda: at  # type: ignore[method-assign]
    sender = Sender(chat.split(":")[1], "Alice")
    inbound = Inbound(channel="telegram", chat=chat, message_id=text, sender=sender, text=text, ts=at)
    return stores.messages.record_inbound(inbound)


def test_health_reads_queues_times_and_due_schedules_from_the_stores(stores: Stores, tmp_path: Path) -> None:
    tasks = TaskStore(stores.db)
    first = _inbound(stores, "telegram:5", "hello", NOON - 300)
    _inbound(stores, "telegram:5", "still there?", NOON - 120)  # not answered yet
    asking = _inbound(stores, "telegram:1", "/health", NOON)
    stores.messages.mark_consumed([first, asking])
    stores.messages._clock = lambda: NOON - 200  # type: ignore[method-assign]
    stores.messages.record_outbound("telegram:5", "telegram", "9", "hi")
    stores.outbox._clock = lambda: NOON - 600  # type: ignore[method-assign]
    stores.outbox.add([SendText(chat="telegram:5", text="late")], [NOON])
    for task_id, state in (("a", TaskState.PENDING), ("b", TaskState.RUNNING), ("c", TaskState.COMPLETED)):
        tasks.create(Task(task_id, "telegram:5", "do it", state, NOON, NOON))
    schedules = stores.schedules
    for kind, due in (("text", NOON + 1800), ("text", NOON + 600), ("text", NOON + 2 * HOUR), ("task", NOON + 900)):
        schedules.create(chat="telegram:5", creator="telegram:5", kind=kind, body="b", tz="UTC", next_due=due, now=NOON)
    schedules.set_followup("telegram:5", "and then?", due=NOON + 60, now=NOON)
    sources = HealthSources(
        stores.messages, stores.outbox, tasks, schedules, tmp_path, NOON - 3 * HOUR - 300, lambda: False,
        model_status=lambda: ["openai:back (back): no call recorded yet"], clock=lambda: NOON,
    )
    lines = health_text(sources, asking, DiskUse(1_700_000, 12, True, 5 << 30, 20 << 30)).splitlines()
    assert lines[13].startswith("Memory: ") and " resident" in lines[13]
    lines[13] = "Memory: (read from /proc at the time)"
    assert lines == [
        "Health at 08:00 UTC",
        "Process uptime: 3 h 5 min (started 04:55 UTC)",
        "Paused: no",
        "Last message in: 2 min ago (07:58 UTC)",  # not the /health asking
        "Last message sent: 3 min ago (07:56 UTC)",
        "Inbox: 1 not yet answered",
        "Outbox: 1 not yet delivered (oldest recorded 10 min ago (07:50 UTC))",
        "Tasks: 1 queued, 1 running",
        "Reminders due in the next hour: 2, the first in 10 min (08:10 UTC)",  # not the one in two hours
        "Scheduled tasks due in the next hour: 1, the first in 15 min (08:15 UTC)",  # the follow-up is not the user's
        "Breakers: none open (the tool-error breakers belong to one turn or task run and end it when they trip)",
        "Models:",
        "- openai:back (back): no call recorded yet",
        "Memory: (read from /proc at the time)",
        "Disk: data dir 1.6 MiB in 12 files; 5.0 GiB free of 20.0 GiB",
    ]


def test_health_when_paused_and_nothing_happened_yet(stores: Stores, tmp_path: Path) -> None:
    sources = HealthSources(
        stores.messages, stores.outbox, TaskStore(stores.db), stores.schedules, tmp_path, NOON, lambda: True,
        model_status=lambda: [], breakers=lambda: ["Claude Code crashes: 2 in the last 10 min (gives up at 10)"],
        clock=lambda: NOON + 5,
    )
    text = health_text(sources, None, DiskUse(0, 0, False, None, None))
    assert "Paused: yes, answering only you (/resume)" in text
    assert "Last message in: never" in text and "Last message sent: never" in text
    assert "Reminders due in the next hour: none" in text
    assert "Breakers: Claude Code crashes: 2 in the last 10 min (gives up at 10)" in text
    assert "Disk: data dir at least 0 B in 0 files; free space unknown" in text


def test_recent_failures_are_the_newest_errors_among_the_latest_calls(stores: Stores) -> None:
    calls = stores.tool_calls
    calls._clock = lambda: NOON  # type: ignore[method-assign]
    calls.record(chat="telegram:1", turn_id=None, name="web_fetch", args={}, result=None, error="timed out", duration_ms=5)
    for _ in range(30):
        calls.record(chat="telegram:1", turn_id=None, name="clock", args={}, result="ok", error=None, duration_ms=1)
    calls.record(chat=None, turn_id=None, name="run", args={}, result=None, error="exit 1", duration_ms=5)
    assert [row["name"] for row in calls.recent_failures(10)] == ["run", "web_fetch"]
    assert [row["name"] for row in calls.recent_failures(1)] == ["run"]
    assert [row["name"] for row in calls.recent_failures(10, among=5)] == ["run"]  # web_fetch is 32 calls back


def test_refused_lately_is_newest_first_with_counts_and_a_total(stores: Stores) -> None:
    refused = stores.unauthorized
    refused.record("telegram:7", "7", "Mallory", "let me in", now=NOON - 100)
    refused.record("telegram:7", "7", "Mallory", "please", now=NOON - 50)
    refused.record("telegram:-100", "9", "Eve", "spam", title="Spam Group", now=NOON - 70)
    refused.record("telegram:8", "8", "Trudy", "hi", now=NOON - 500)
    found, total = refused.refused_lately(2)
    assert [(s.sender_name, s.count, s.last_at) for s in found] == [("Mallory", 2, NOON - 50), ("Eve", 1, NOON - 70)]
    assert total == 3


def test_audit_names_failures_refusals_and_what_did_not_load(stores: Stores) -> None:
    stores.tool_calls._clock = lambda: NOON - 120  # type: ignore[method-assign]
    stores.tool_calls.record(chat="telegram:1", turn_id=None, name="web_fetch", args={}, result=None,
                             error="refused:\n  the key hunter2-secret " + "z" * 300, duration_ms=5)
    stores.unauthorized.record("telegram:7", "7", "Mallory", "my plan is secret", now=NOON - 60)
    stores.unauthorized.record("telegram:-100", "9", "Eve", "spam", title="Spam Group", now=NOON - 3600)
    sources = AuditSources(stores.tool_calls, stores.unauthorized, lambda: ["the run tool is off: no bwrap"],
                           redact=stores.redact, clock=lambda: NOON)
    lines = audit_text(sources).splitlines()
    assert lines[0] == "Audit at 08:00 UTC"
    failure = lines[3]
    assert failure.startswith("- web_fetch in telegram:1, 2 min ago (07:58 UTC): refused: the key [REDACTED:secret] zzz")
    assert failure.endswith("…") and "hunter2" not in failure
    assert "- Mallory (id 7): 1 message, last 1 min ago (07:59 UTC)" in lines
    assert "- group “Spam Group” (telegram:-100): 1 message, last from Eve (id 9) 1 h ago (07:00 UTC)" in lines
    assert "my plan" not in "\n".join(lines)
    assert "- the run tool is off: no bwrap" in lines
    assert lines[-1] == "Last backup: no backups made"


def test_audit_with_a_backup_names_its_time(stores: Stores) -> None:
    sources = AuditSources(stores.tool_calls, stores.unauthorized, lambda: [], last_backup=lambda: NOON - 7200,
                           clock=lambda: NOON)
    text = audit_text(sources)
    assert text.endswith("Last backup: 2 h ago (06:00 UTC)")
    assert "- none among the last 10000 tool calls" in text and "- nobody" in text and "- none" in text
