"""The task bus against a controllable executor: operations, events, checkpoints, errors."""

from __future__ import annotations

import asyncio

import pytest

from bicameral.store import Stores
from bicameral.tasks.bus import TaskBus, TaskError
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import EventKind, TaskOutcome, TaskState


class GateExecutor:
    """Runs until released; records what it saw at each start."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.starts: list[tuple[str, list[str], list[dict] | None]] = []
        self.outcome = TaskOutcome(result="done")

    async def run(self, task, control):
        self.starts.append((task.spec, control.drain_notes(), control.resume_messages()))
        control.checkpoint([{"role": "user", "content": [{"type": "text", "text": task.spec}]}])
        await control.progress("step one")
        await self.release.wait()
        notes = control.drain_notes()
        return TaskOutcome(result=f"{self.outcome.result} {' '.join(notes)}".strip()) if self.outcome.ok else self.outcome


@pytest.fixture
async def bus_and_events(tmp_path):
    stores = Stores.open(tmp_path / "db.sqlite")
    events: list[tuple[str, EventKind]] = []

    async def on_event(task, event):
        events.append((task.id, event.kind))

    executor = GateExecutor()
    bus = TaskBus(TaskStore(stores.db), executor, on_event=on_event, progress_interval=0, retry_delay=0)
    yield bus, executor, events
    await bus.close()
    stores.close()


async def _settle():
    for _ in range(5):
        await asyncio.sleep(0)


async def test_spawn_runs_to_completion_with_real_events(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "do the thing", label="thing")
    await _settle()
    executor.release.set()
    await asyncio.sleep(0.05)
    assert bus.get(task.id).state is TaskState.COMPLETED
    assert [k for _, k in events] == [EventKind.STARTED, EventKind.PROGRESS, EventKind.COMPLETED]


async def test_append_reaches_the_running_task(bus_and_events):
    bus, executor, _ = bus_and_events
    task = await bus.spawn("c:1", "report")
    await _settle()
    await bus.append(task.id, "include staging")
    executor.release.set()
    await asyncio.sleep(0.05)
    assert "include staging" in bus.get(task.id).result


async def test_redirect_restarts_from_the_checkpoint_with_the_new_spec(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "all logs")
    await _settle()
    await bus.redirect(task.id, "auth logs only")
    await _settle()
    spec, notes, resumed = executor.starts[-1]
    assert spec == "auth logs only"
    assert any("auth logs only" in n for n in notes)
    assert resumed is not None, "the pivot resumes from the saved transcript"
    assert [r for r, _ in bus.store.checkpoints(task.id)].count("redirect") == 1
    executor.release.set()
    await asyncio.sleep(0.05)
    assert bus.get(task.id).state is TaskState.COMPLETED
    assert [k for _, k in events].count(EventKind.STARTED) == 1


async def test_branch_starts_from_the_parents_transcript(bus_and_events):
    bus, executor, _ = bus_and_events
    parent = await bus.spawn("c:1", "logs")
    await _settle()
    child = await bus.branch(parent.id, "check the deploy", label="deploy")
    await _settle()
    assert child.parent_id == parent.id and child.label == "deploy"
    spec, notes, resumed = executor.starts[-1]
    assert spec == "check the deploy" and resumed is not None and "check the deploy" in notes[0]


async def test_cancel_stops_and_records_it(bus_and_events):
    bus, executor, events = bus_and_events
    task = await bus.spawn("c:1", "long job")
    await _settle()
    cancelled = await bus.cancel(task.id)
    assert cancelled.state is TaskState.CANCELLED
    assert events[-1][1] is EventKind.CANCELLED


async def test_operations_on_finished_or_unknown_tasks_explain_themselves(bus_and_events):
    bus, executor, _ = bus_and_events
    task = await bus.spawn("c:1", "quick", label="quick")
    executor.release.set()
    await asyncio.sleep(0.05)
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
    await asyncio.sleep(0.1)
    kinds = [k for _, k in events]
    assert kinds.count(EventKind.RETRYING) == 1 and kinds[-1] is EventKind.FAILED
    assert bus.get(task.id).error == "provider down"


async def test_open_tasks_resume_after_a_restart(tmp_path):
    stores = Stores.open(tmp_path / "db.sqlite")
    first = GateExecutor()
    bus = TaskBus(TaskStore(stores.db), first, on_event=_ignore)
    task = await bus.spawn("c:1", "survive")
    await _settle()
    await bus.close()
    assert TaskStore(stores.db).get(task.id).state is TaskState.RUNNING
    second = GateExecutor()
    second.release.set()
    bus2 = TaskBus(TaskStore(stores.db), second, on_event=_ignore)
    assert await bus2.resume_open() == 1
    await asyncio.sleep(0.05)
    assert second.starts[0][2] is not None, "resumed from its checkpoint"
    assert TaskStore(stores.db).get(task.id).state is TaskState.COMPLETED
    await bus2.close()
    stores.close()


async def _ignore(task, event):
    return None
