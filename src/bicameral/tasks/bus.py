"""The task bus: spawn / append / redirect / branch / cancel, each task driven by an executor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bicameral.backoff import RetryPolicy
from bicameral.events import Attachment, Authority, Role
from bicameral.failures import failure_detail, failure_sentence
from bicameral.models.scope import enter
from bicameral.sandbox.artifacts import Artifact
from bicameral.tasks.executor import Executor
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import EventKind, Task, TaskEvent, TaskOutcome, TaskState

log = logging.getLogger(__name__)

OnEvent = Callable[[Task, TaskEvent], Awaitable[None]]
_CANCEL_WAIT_SECONDS = 1.0


class TaskError(Exception):
    """An operation the bus cannot do (unknown task, task already finished); the text says why."""


class NotYours(TaskError):
    """Someone tried to change or stop a task another person's words caused; the text is for them."""


@dataclass
class _Run:
    """In-memory state of a task being driven."""

    notes: list[str] = field(default_factory=list)
    chat: str = ""
    aio: asyncio.Task[None] | None = None
    step: asyncio.Task[TaskOutcome] | None = None
    pivot: bool = False
    cancelled: bool = False
    started: bool = False
    last_progress_at: float = 0.0
    latest_progress: TaskEvent | None = None


@dataclass
class _Control:
    """The bus's `TaskControl` (tasks/executor.py) for one running task."""

    task: Task
    _bus: TaskBus
    _run: _Run

    def resume_messages(self) -> list[dict[str, Any]] | None:
        return self._bus.store.latest_checkpoint(self.task.id)

    def drain_notes(self) -> list[str]:
        notes, self._run.notes = self._run.notes, []
        return notes

    def checkpoint(self, messages: list[dict[str, Any]], reason: str = "step") -> None:
        self._bus.store.checkpoint(self.task.id, reason, messages)

    async def progress(self, text: str) -> None:
        await self._bus._progress(self.task, self._run, text)

    def keep_files(self, files: tuple[Artifact, ...]) -> None:
        self._bus.store.update(self.task.id, artifacts=files)

    def authority(self) -> Authority | None:
        current = self._bus.store.get(self.task.id)
        return current.authority if current is not None else self.task.authority


class TaskBus:
    def __init__(
        self,
        store: TaskStore,
        executor: Executor,
        *,
        on_event: OnEvent,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        progress_interval: float = 5.0,
        max_attempts: int = 2,
        retry_delay: float = 5.0,
        scheduled_retry: RetryPolicy | None = None,
    ) -> None:
        self.store = store
        self._executor = executor
        self._on_event = on_event
        self._clock = clock
        self._sleep = sleep
        self._progress_interval = progress_interval
        self._max_attempts = max_attempts
        self.retry_delay = retry_delay
        self._scheduled_retry = scheduled_retry  # a scheduled task's failures: nobody waits, so more patience
        self._runs: dict[str, _Run] = {}

    # --- operations ---

    async def spawn(
        self,
        chat: str,
        spec: str,
        *,
        context: str = "",
        label: str | None = None,
        parent_id: str | None = None,
        transcript: list[dict[str, Any]] | None = None,
        origin_message: str | None = None,
        thread_id: str | None = None,
        attachments: tuple[Attachment, ...] = (),
        schedule_id: int | None = None,
        authority: Authority | None = None,
    ) -> Task:
        """Create a task and start it; returns at once with its id."""
        now = self._clock()
        task = Task(
            id=_new_id(),
            chat=chat,
            spec=spec.strip(),
            state=TaskState.PENDING,
            created_at=now,
            updated_at=now,
            label=(label or "").strip()[:40] or None,
            context=context,
            parent_id=parent_id,
            origin_message=origin_message,
            thread_id=thread_id,
            attachments=attachments,
            schedule_id=schedule_id,
            authority=authority,
        )
        self.store.create(task)
        if transcript is not None:
            self.store.checkpoint(task.id, "fork", transcript)
        self._start(task, _Run())
        return task

    async def append(
        self, task_id: str, text: str, *, by: Authority | None = None, attachments: tuple[Attachment, ...] = ()
    ) -> Task:
        """Hand extra context (and files the user sent) to a running task; it reaches the loop at its next tool boundary.

        `by` is whose words these are (None: the system's own): they must be allowed to steer the task, and from
        the next step on it runs with no more than their rights.
        """
        task, run = self._live(task_id, by)
        sent = "".join(f"\n- {a.workspace_path} ({a.kind})" for a in attachments if a.workspace_path)
        files = f"\nThe user also sent these files, now in your workspace:{sent}" if sent else ""
        if by is not None:
            task = self.store.update(task.id, **self._lowered(task, by))
        run.notes.append(f"Additional context from the user (take it into account): {text.strip()}{files}")
        await self._emit(task, EventKind.APPENDED, text)
        return task

    async def redirect(self, task_id: str, new_spec: str, *, by: Authority | None = None) -> Task:
        """Checkpoint the work so far and pivot it to a new instruction without losing it (`by` as for append)."""
        task, run = self._live(task_id, by)
        latest = self.store.latest_checkpoint(task.id)
        if latest is not None:
            self.store.checkpoint(task.id, "redirect", latest)
        task = self.store.update(task.id, spec=new_spec.strip(), **self._lowered(task, by))
        run.notes.append(
            "The user changed what they want. New instruction (it replaces the earlier one; reuse any work "
            f"above that still helps): {new_spec.strip()}"
        )
        await self._emit(task, EventKind.REDIRECTED, new_spec)
        if run.step is not None and not run.step.done():
            run.pivot = True
            run.step.cancel()  # drop the in-flight step; the checkpoint keeps every finished one
        return task

    async def branch(
        self, task_id: str, fork_spec: str, *, by: Authority | None = None, label: str | None = None
    ) -> Task:
        """Fork a new parallel task that starts from the parent's current transcript.

        The fork carries the parent's words and `by`'s, so it may do no more than the least of them; it starts
        from the parent's transcript only if `by` could read it, else from the parent's brief alone.
        """
        parent = self.get(task_id)
        _check_steer(parent, by)
        readable = by is None or by.may_read(owned_by(parent))
        transcript = self.store.latest_checkpoint(parent.id) if readable else None
        child = await self.spawn(
            parent.chat,
            fork_spec,
            context=parent.context,
            label=label,
            parent_id=parent.id,
            transcript=transcript,
            origin_message=parent.origin_message,
            thread_id=parent.thread_id,
            attachments=parent.attachments,
            authority=owned_by(parent).joined(by) if by is not None else parent.authority,
        )
        if transcript is not None:
            self._runs[child.id].notes.append(
                f"This is a new task, forked from the work above. Do only this now: {fork_spec.strip()}"
            )
        return child

    async def cancel(self, task_id: str, *, by: Authority | None = None) -> Task:
        """Hard-stop a task: its HTTP calls and subprocesses are cancelled at once (`by` must be allowed to)."""
        task, run = self._live(task_id, by)
        run.cancelled = True
        if run.aio is not None and not run.aio.done():
            run.aio.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(run.aio), _CANCEL_WAIT_SECONDS)
        task = self.get(task_id)
        if task.state.is_open:
            task = self._finish(task, TaskState.CANCELLED)
            await self._emit(task, EventKind.CANCELLED)
        return task

    # --- queries ---

    def get(self, task_id: str) -> Task:
        task = self.store.get(task_id)
        if task is None:
            raise TaskError(f"there is no task {task_id!r}")
        return task

    def find(self, chat: str, ref: str) -> Task:
        """A task of this chat by id or label (case-insensitive); the newest match wins."""
        ref = ref.strip().lower()
        for task in reversed(self.store.for_chat(chat, limit=50)):
            if task.id.lower() == ref or (task.label or "").lower() == ref:
                return task
        raise TaskError(f"no task {ref!r} in this chat")

    def open_tasks(self, chat: str) -> list[Task]:
        return self.store.for_chat(chat, open_only=True)

    def last_signal(self, task_id: str) -> TaskEvent | None:
        """The newest real event, including progress not yet flushed past the throttle."""
        stored = self.store.last_event(task_id)
        run = self._runs.get(task_id)
        pending = run.latest_progress if run else None
        if pending is not None and (stored is None or pending.ts > stored.ts):
            return pending
        return stored

    # --- lifecycle ---

    async def resume_open(self, chat: str | None = None) -> int:
        """Restart every task left open by a previous process (of one chat, or all), from its last checkpoint."""
        left = self.store.open_tasks() if chat is None else self.store.for_chat(chat, open_only=True)
        tasks = [t for t in left if t.id not in self._runs]
        for task in tasks:
            log.info("resuming task %s (%s) from its checkpoint", task.id, task.name)
            self._start(task, _Run(), resumed=True)
        return len(tasks)

    async def finish(self) -> None:
        """Wait until every task this process drives has ended and its last event was handled."""
        while running := [r.aio for r in self._runs.values() if r.aio is not None and not r.aio.done()]:
            await asyncio.wait(running)

    def drives(self, chat: str) -> bool:
        """Whether this process drives an open task of the chat."""
        return any(run.chat == chat for run in self._runs.values())

    async def close(self, chat: str | None = None) -> None:
        """Stop driving tasks (of one chat, or all) without changing their state, so whoever resumes them next can."""
        ids = [i for i, run in self._runs.items() if chat in (None, run.chat)]
        runs = [aio for i in ids if (aio := self._runs[i].aio) is not None and not aio.done()]
        for aio in runs:
            aio.cancel()
        for aio in runs:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await aio
        for i in ids:
            self._runs.pop(i, None)

    # --- driving ---

    def _start(self, task: Task, run: _Run, *, resumed: bool = False) -> None:
        self._runs[task.id] = run
        run.chat = task.chat
        run.aio = asyncio.create_task(self._drive(task, run, resumed), name=f"task:{task.id}")

    async def _drive(self, task: Task, run: _Run, resumed: bool) -> None:
        # This asyncio task's own context: its model calls count for the task's chat (and use that chat's models),
        # whether it was spawned in a turn, resumed at start or retried; they count for the people whose words it carries.
        enter(task.chat, owned_by(task).people)
        try:
            outcome = await self._steps(task, run, resumed)
        except asyncio.CancelledError:
            if run.cancelled:
                return  # cancel() records the state
            raise  # shutdown: the task stays open and resumes on the next start
        except Exception as exc:
            # The user hears a plain sentence; the scrubbed type, message and traceback go to the log and the trace.
            detail = failure_detail(exc)
            log.error("executor crashed on task %s: %s", task.id, detail)
            outcome = TaskOutcome(error_kind="internal", error=failure_sentence("internal"), detail=detail, retryable=True)
        await self._conclude(self.get(task.id), run, outcome)

    async def _steps(self, task: Task, run: _Run, resumed: bool) -> TaskOutcome:
        """Run the executor; a redirect cancels only the inner run, which restarts from the checkpoint."""
        task = self.store.update(task.id, state=TaskState.RUNNING, attempts=task.attempts + 1)
        if not run.started:
            run.started = True
            await self._emit(task, EventKind.STARTED, "resumed after a restart" if resumed else "")
        while True:
            run.pivot = False
            run.step = asyncio.create_task(self._executor.run(task, _Control(task, self, run)))
            try:
                return await run.step
            except asyncio.CancelledError:
                outer = asyncio.current_task()
                if run.pivot and not run.cancelled and outer is not None and not outer.cancelling():
                    task = self.get(task.id)
                    continue
                raise

    async def _conclude(self, task: Task, run: _Run, outcome: TaskOutcome) -> None:
        if run.cancelled or not task.state.is_open:
            return
        if outcome.ok:
            task = self._finish(task, TaskState.COMPLETED, result=outcome.result or "")
            await self._emit(task, EventKind.COMPLETED, outcome.result or "")
            return
        policy = self._scheduled_retry if task.schedule_id is not None else None
        attempts, delay = (policy.attempts, policy.delay(task.attempts)) if policy else (self._max_attempts, self.retry_delay)
        if outcome.retryable and task.attempts < attempts:
            await self._emit(task, EventKind.RETRYING, outcome.error_kind or "error")
            await self._sleep(delay)
            if not run.cancelled:
                self._start(self.get(task.id), run)
            return
        task = self._finish(task, TaskState.FAILED, error=outcome.error or failure_sentence(outcome.error_kind))
        kind = outcome.error_kind or "internal"
        await self._emit(task, EventKind.FAILED, f"{kind}: {outcome.detail}" if outcome.detail else kind)

    def _finish(self, task: Task, state: TaskState, **fields: object) -> Task:
        self._runs.pop(task.id, None)
        return self.store.update(task.id, state=state, finished_at=self._clock(), **fields)

    def _live(self, task_id: str, by: Authority | None = None) -> tuple[Task, _Run]:
        task = self.get(task_id)
        _check_steer(task, by)
        run = self._runs.get(task.id)
        if not task.state.is_open or run is None:
            raise TaskError(f"task {task.name!r} is already {task.state.value}")
        return task, run

    @staticmethod
    def _lowered(task: Task, by: Authority | None) -> dict[str, Authority]:
        """The task's new authority once `by`'s words are in it (nothing to change for the system's own)."""
        return {} if by is None else {"authority": owned_by(task).joined(by)}

    async def _progress(self, task: Task, run: _Run, text: str) -> None:
        event = TaskEvent(task.id, EventKind.PROGRESS, self._clock(), text[:300])
        run.latest_progress = event
        # The user-facing stream is throttled; the latest step is still kept for status answers.
        if event.ts - run.last_progress_at >= self._progress_interval:
            run.last_progress_at = event.ts
            self.store.add_event(event)
            await self._deliver(task, event)

    async def _emit(self, task: Task, kind: EventKind, data: str = "") -> None:
        event = TaskEvent(task.id, kind, self._clock(), data[:2000])
        self.store.add_event(event)
        await self._deliver(task, event)

    async def _deliver(self, task: Task, event: TaskEvent) -> None:
        try:
            await self._on_event(task, event)
        except Exception:  # a delivery problem must not kill the task
            log.exception("task event %s of %s was not delivered", event.kind.value, task.id)


def owned_by(task: Task) -> Authority:
    """Whose words the task carries; one stored before that was kept belongs to no one but the owner and admins."""
    return task.authority or Authority(Role.MEMBER)


def _check_steer(task: Task, by: Authority | None) -> None:
    if by is not None and not by.may_steer(owned_by(task)):
        raise NotYours(
            f"task {task.name!r} was asked for by someone else; only they, the owner or a group admin can change or stop it"
        )


def _new_id() -> str:
    return "t" + uuid.uuid4().hex[:6]
