"""The task bus against a controllable executor: operations, events, checkpoints, errors."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from bicameral.backoff import RetryPolicy
from bicameral.store import Stores
from bicameral.tasks.bus import TaskBus, TaskError
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import EventKind, TaskOutcome, TaskState

WAIT = 10.0  # generous: these waits end on an event, the bound only catches a hang


class Changes:
    """Wakes waiters whenever the bus or the executor did something."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def poke(self) -> None:
        self._changed.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while True:
                self._changed.clear()
                if condition():
                    return
                await self._changed.wait()


class GateExecutor:
    """Runs until released; records what it saw at each start and how many runs wait on the gate."""

    def __init__(self, changes: Changes) -> None:
        self.changes = changes
        self.release = asyncio.Event()
        self.starts: list[tuple[str, list[str], list[dict] | None]] = []
        self.waiting = 0
        self.outcome = TaskOutcome(result="done")

    async def run(self, task, control):
        self.starts.append((task.spec, control.drain_notes(), control.resume_messages()))
        control.checkpoint(transcript(task.spec))
        await control.progress("step one")
        self.waiting += 1
        self.changes.poke()
        await self.release.wait()
        notes = control.drain_notes()
        return TaskOutcome(result=f"{self.outcome.result} {' '.join(notes)}".strip()) if self.outcome.ok else self.outcome

    async def waits(self, runs: int = 1) -> None:
        """Until `runs` runs in all reached the gate (each saved its checkpoint first)."""
        await self.changes.until(lambda: self.waiting >= runs)


def transcript(spec: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": spec}]}]


class Events(list):
    """(task id, kind) of every event the bus reported, awaitable."""

    def __init__(self, changes: Changes) -> None:
        super().__init__()
        self.changes = changes

    async def __call__(self, task, event) -> None:
        self.append((task.id, event.kind))
        self.changes.poke()

    async def reach(self, task_id: str, kind: EventKind) -> None:
        await self.changes.until(lambda: (task_id, kind) in self)

    @property
    def kinds(self) -> list[EventKind]:
        return [k for _, k in self]


@pytest.fixture
async def bus_and_events(tmp_path, database_location):
    stores = Stores.open(database_location, data_dir=tmp_path)
    changes = Changes()
    events = Events(changes)
    executor = GateExecutor(changes)
    bus = TaskBus(TaskStore(stores.db), executor, on_event=events, progress_interval=0, retry_delay=0)
    yield bus, executor, events
    await bus.close()
    stores.close()


async def test_spawn_runs_to_completion_with_real_events(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "do the thing", label="thing")
    await executor.waits()
    executor.release.set()
    await events.reach(task.id, EventKind.COMPLETED)
    assert bus.get(task.id).state is TaskState.COMPLETED
    assert events.kinds == [EventKind.STARTED, EventKind.PROGRESS, EventKind.COMPLETED]


async def test_append_reaches_the_running_task(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "report")
    await executor.waits()
    await bus.append(task.id, "include staging")
    executor.release.set()
    await events.reach(task.id, EventKind.COMPLETED)
    assert "include staging" in bus.get(task.id).result


async def test_redirect_restarts_from_the_checkpoint_with_the_new_spec(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "all logs")
    await executor.waits()
    await bus.redirect(task.id, "auth logs only")
    await executor.waits(2)
    spec, notes, resumed = executor.starts[-1]
    assert spec == "auth logs only"
    assert any("auth logs only" in n for n in notes)
    assert resumed == transcript("all logs"), "the pivot resumes from the saved transcript"
    executor.release.set()
    await events.reach(task.id, EventKind.COMPLETED)
    assert bus.get(task.id).state is TaskState.COMPLETED
    assert events.kinds.count(EventKind.STARTED) == 1


async def test_branch_starts_from_the_parents_transcript(bus_and_events):
    bus, executor, _ = bus_and_events
    parent = await bus.spawn("c:1", "logs")
    await executor.waits()
    child = await bus.branch(parent.id, "check the deploy", label="deploy")
    await executor.waits(2)
    assert child.parent_id == parent.id and child.label == "deploy"
    spec, notes, resumed = executor.starts[-1]
    assert spec == "check the deploy" and resumed == transcript("logs") and "check the deploy" in notes[0]


async def test_cancel_stops_and_records_it(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "long job")
    await executor.waits()
    cancelled = await bus.cancel(task.id)
    assert cancelled.state is TaskState.CANCELLED
    assert events[-1][1] is EventKind.CANCELLED


async def test_operations_on_finished_or_unknown_tasks_explain_themselves(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "quick", label="quick")
    executor.release.set()
    await events.reach(task.id, EventKind.COMPLETED)
    with pytest.raises(TaskError, match="already completed"):
        await bus.append(task.id, "more")
    with pytest.raises(TaskError, match="already completed"):
        await bus.cancel(task.id)
    with pytest.raises(TaskError, match="no task"):
        bus.find("c:1", "nonexistent")
    with pytest.raises(TaskError, match="no task"):
        bus.find("c:2", "quick")  # another chat's task is invisible
    assert bus.find("c:1", "QUICK").id == task.id


async def test_a_failure_is_retried_once_then_reported(bus_and_events):
    bus, executor, events = bus_and_events
    executor.outcome = TaskOutcome(error_kind="server", error="provider down", retryable=True)
    executor.release.set()
    task = await bus.spawn("c:1", "fragile")
    await events.reach(task.id, EventKind.FAILED)
    assert events.kinds.count(EventKind.RETRYING) == 1 and events.kinds[-1] is EventKind.FAILED
    assert bus.get(task.id).error == "provider down"


async def test_a_scheduled_task_s_failures_follow_the_schedule_s_retry_policy(tmp_path, database_location):
    stores = Stores.open(database_location, data_dir=tmp_path)
    changes = Changes()
    events = Events(changes)
    executor = GateExecutor(changes)
    executor.outcome = TaskOutcome(error_kind="server", error="provider down", retryable=True)
    executor.release.set()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(attempts=4, base_seconds=30, cap_seconds=50)
    bus = TaskBus(TaskStore(stores.db), executor, on_event=events, sleep=sleep, progress_interval=0, max_attempts=2,
                  retry_delay=5, scheduled_retry=policy)
    try:
        scheduled = await bus.spawn("c:1", "the morning digest", schedule_id=7)
        await events.reach(scheduled.id, EventKind.FAILED)
        assert waits == [30, 50, 50] and bus.get(scheduled.id).attempts == 4
        assert bus.get(scheduled.id).schedule_id == 7
        waits.clear()
        asked = await bus.spawn("c:1", "something the user asked for")
        await events.reach(asked.id, EventKind.FAILED)
        assert waits == [5] and bus.get(asked.id).attempts == 2  # the bus's own policy for everything else
    finally:
        await bus.close()
        stores.close()


async def test_open_tasks_resume_after_a_restart(tmp_path, database_location):
    stores = Stores.open(database_location, data_dir=tmp_path)
    changes = Changes()
    first = GateExecutor(changes)
    bus = TaskBus(TaskStore(stores.db), first, on_event=Events(changes))
    task = await bus.spawn("c:1", "survive")
    await first.waits()
    await bus.close()
    assert TaskStore(stores.db).get(task.id).state is TaskState.RUNNING
    second = GateExecutor(changes)
    second.release.set()
    events = Events(changes)
    bus2 = TaskBus(TaskStore(stores.db), second, on_event=events)
    assert await bus2.resume_open() == 1
    await events.reach(task.id, EventKind.COMPLETED)
    assert second.starts[0][2] == transcript("survive"), "resumed from its checkpoint"
    assert TaskStore(stores.db).get(task.id).state is TaskState.COMPLETED
    await bus2.close()
    stores.close()
