"""What an executor is to the bus: the `Executor` base, the `TaskControl` it sees while it runs a task, and the task's rights."""

from __future__ import annotations

from typing import Any, Protocol

from bicameral.events import Authority, Role
from bicameral.sandbox.artifacts import Artifact
from bicameral.tasks.task import Task, TaskOutcome


class TaskControl(Protocol):
    """What an executor sees of the bus while it runs one task."""

    task: Task

    def resume_messages(self) -> list[dict[str, Any]] | None:
        """The latest checkpoint of this task's transcript, if any."""

    def drain_notes(self) -> list[str]:
        """Context the user added (append / redirect) since the last call."""

    def checkpoint(self, messages: list[dict[str, Any]], reason: str = "step") -> None:
        """Persist the transcript so far: redirect and restart resume from here."""

    async def progress(self, text: str) -> None:
        """Report a real step (throttled before it reaches the user)."""

    def keep_files(self, files: tuple[Artifact, ...]) -> None:
        """Store the files the result will send, as they are chosen (a restart keeps them)."""

    def authority(self) -> Authority | None:
        """Whose words the task carries now: lowered when someone else's are added (None: a task from before)."""


class Executor:
    """Runs tasks for the bus; subclasses override `run`, and `start`/`stop` when they hold resources."""

    async def start(self) -> None:
        """Acquire what the executor needs (servers, processes) before the first task."""

    async def stop(self) -> None:
        """Release it; called once at shutdown."""

    async def run(self, task: Task, control: TaskControl) -> TaskOutcome:
        """Run a task to an outcome, honouring notes at tool boundaries; cancellation stops it at once."""
        raise NotImplementedError


def acting_for(task: Task, legacy_owner: bool) -> Authority:
    """The rights a task's tools run with; a task stored before authority was kept runs as its requester did."""
    return task.authority or Authority(Role.OWNER if legacy_owner else Role.MEMBER)
