"""Status from real signals only: what a task last reported, and when; nothing inferred."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bicameral.tasks.task import EventKind, Task, TaskEvent, TaskState

_SIGNAL_WORDS = {
    EventKind.STARTED: "started",
    EventKind.PROGRESS: "working",
    EventKind.APPENDED: "got your added context",
    EventKind.REDIRECTED: "switched to your correction",
    EventKind.RETRYING: "hit a snag and is retrying",
    EventKind.COMPLETED: "finished",
    EventKind.FAILED: "failed",
    EventKind.CANCELLED: "cancelled",
}


def describe_status(
    tasks: Sequence[Task],
    last_signal: Callable[[str], TaskEvent | None],
    recent: Sequence[Task],
    now: float,
) -> str:
    """One line per task from its latest recorded event; says plainly when nothing is running."""
    if not tasks:
        return _nothing_running(recent, now)
    return "\n".join(f"• {task.name}: {_line(task, last_signal(task.id), now)}" for task in tasks)


def ago(seconds: float) -> str:
    return f"{duration(seconds)} ago"


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    hours = seconds // 3600
    return f"about {hours} hour{'s' if hours > 1 else ''}"


def _line(task: Task, event: TaskEvent | None, now: float) -> str:
    if task.state is TaskState.COMPLETED:
        return f"finished {ago(now - (task.finished_at or task.updated_at))}"
    if task.state in (TaskState.FAILED, TaskState.CANCELLED):
        return f"{task.state.value} {ago(now - (task.finished_at or task.updated_at))}"
    started = f"started {ago(now - task.created_at)}"
    if event is None or event.kind is EventKind.STARTED:
        return f"{started}, no step reported yet"
    if event.kind is EventKind.PROGRESS:
        return f"{started}; last step: {event.data} ({ago(now - event.ts)})"
    return f"{started}; {_SIGNAL_WORDS[event.kind]} {ago(now - event.ts)}"


def _nothing_running(recent: Sequence[Task], now: float) -> str:
    finished = [t for t in recent if t.state is TaskState.COMPLETED]
    if finished:
        last = finished[-1]
        when = ago(now - (last.finished_at or last.updated_at))
        return f"Nothing is running right now. The last thing I finished was {last.name} ({when})."
    return "Nothing is running right now."
