"""The task: a unit of back-chamber work, its states and the real events it emits."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bicameral.events import Attachment, Authority
from bicameral.sandbox.artifacts import Artifact


class TaskState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_open(self) -> bool:
        return self in (TaskState.PENDING, TaskState.RUNNING, TaskState.PAUSED)


class EventKind(str, Enum):
    STARTED = "started"
    PROGRESS = "progress"
    APPENDED = "appended"
    REDIRECTED = "redirected"
    RETRYING = "retrying"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Task:
    id: str
    chat: str
    spec: str
    state: TaskState
    created_at: float
    updated_at: float
    label: str | None = None
    context: str = ""
    parent_id: str | None = None
    origin_message: str | None = None
    thread_id: str | None = None
    result: str | None = None
    error: str | None = None
    attempts: int = 0
    finished_at: float | None = None
    delivered_at: float | None = None
    attachments: tuple[Attachment, ...] = ()  # the files the user sent with the burst that started it
    artifacts: tuple[Artifact, ...] = ()  # the files its result sends back
    schedule_id: int | None = None  # the schedule whose fire started it
    # Whose words it carries out (everyone who started, added to or corrected it): never more than the least
    # of them may do. None on tasks stored before it was kept.
    authority: Authority | None = None

    @property
    def name(self) -> str:
        """How the front refers to the task: its label, else a short form of its spec."""
        if self.label:
            return self.label
        return self.spec if len(self.spec) <= 60 else self.spec[:57] + "…"


@dataclass(frozen=True)
class TaskEvent:
    task_id: str
    kind: EventKind
    ts: float
    data: str = ""


NOTHING_TO_REPORT = "(finished, with nothing to report)"  # the result of a task whose final message was empty


@dataclass(frozen=True)
class TaskOutcome:
    """What an executor hands back: a result, or a failure kind with the sentence the user is told."""

    result: str | None = None
    error_kind: str | None = None
    error: str | None = None
    detail: str | None = None  # scrubbed evidence for the log and the trace, never shown to the user
    retryable: bool = False

    @property
    def ok(self) -> bool:
        return self.error_kind is None
