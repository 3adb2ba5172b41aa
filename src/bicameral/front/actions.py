"""The front's action tools (reply, react, remember, forget, spawn, append, redirect, branch, cancel, status, wait_for_more)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field, ValidationError

from bicameral.context.envelope import envelope
from bicameral.events import Attachment, OwnerId, React
from bicameral.front.delivery import Delivery
from bicameral.front.status import describe_status
from bicameral.models.base import ToolCall, ToolSpec
from bicameral.scheduler.retry import scheduled_task
from bicameral.tasks.bus import NotYours, TaskBus, TaskError, owned_by
from bicameral.tasks.task import Task
from bicameral.text import NestedTooDeep, normalize_data
from bicameral.tools.base import ToolContext
from bicameral.tools.memory import Forget, ForgetArgs, Remember, RememberArgs
from bicameral.turns.turn import Turn

log = logging.getLogger(__name__)
_MAX_DEPTH = 4  # no action takes more than a flat object


class ReplyArgs(BaseModel):
    text: str = Field(min_length=1, max_length=8000, description="What to say, in your voice (Markdown).")


class ReactArgs(BaseModel):
    message_id: str = Field(description="The id of the user's message to react to.")
    emoji: str = Field(default="👍", max_length=8, description="One emoji: 👍 ❤️ 👀 🔥 🎉 🙏 😁")


class SpawnArgs(BaseModel):
    spec: str = Field(min_length=1, max_length=8000, description="Complete, self-contained task for the executor.")
    label: str | None = Field(default=None, max_length=40, description="Short name for the task, e.g. 'auth logs'.")
    context: str = Field(default="", max_length=8000, description="Relevant facts from the conversation.")


class TaskRef(BaseModel):
    task: str | None = Field(default=None, description="Task id or label; omit when exactly one task is open.")


class AppendArgs(TaskRef):
    context: str = Field(min_length=1, max_length=8000, description="The added detail, as the user meant it.")


class RedirectArgs(TaskRef):
    spec: str = Field(min_length=1, max_length=8000, description="The full corrected task spec.")


class BranchArgs(TaskRef):
    spec: str = Field(min_length=1, max_length=8000, description="The parallel task's complete spec.")
    label: str | None = Field(default=None, max_length=40, description="Short name for the new task.")


class WaitArgs(BaseModel):
    question: str = Field(min_length=1, max_length=500, description="What to ask if the user goes quiet.")


_ACTIONS: dict[str, tuple[str, type[BaseModel]]] = {
    "reply": ("Send a message to the user now.", ReplyArgs),
    "react": ("React to a user's message with one emoji: a light acknowledgement.", ReactArgs),
    "remember": (
        "Keep a durable fact the user told you (\"remember that I'm vegetarian\") for later conversations, "
        "at once and without a task. Same rules as the executor's remember.",
        RememberArgs,
    ),
    "forget": (
        "Delete remembered facts for good when the user asks you to forget something (by id, or by words they "
        "all contain), at once and without a task. Same rules as the executor's forget.",
        ForgetArgs,
    ),
    "spawn": ("Start a background task on the executor. Returns its id.", SpawnArgs),
    "append": ("Add context to a running task (it takes effect at its next step).", AppendArgs),
    "redirect": ("Correct a running task: it keeps its work so far and pivots to the new spec.", RedirectArgs),
    "branch": ("Start a parallel task forked from a running task's context.", BranchArgs),
    "cancel": ("Hard-stop a running task and tell the user.", TaskRef),
    "status": ("Tell the user how tasks are going, from real signals only.", TaskRef),
    "wait_for_more": ("The user is mid-thought: wait, and ask this if they stay quiet.", WaitArgs),
}


@functools.cache
def front_tool_specs() -> list[ToolSpec]:
    """The action tools' specs, built once (schemas never change at run time)."""
    specs = []
    for name, (description, model) in _ACTIONS.items():
        schema = model.model_json_schema()
        schema.pop("title", None)
        specs.append(ToolSpec(name=name, description=description, input_schema=schema))
    return specs


@dataclass
class FrontActions:
    """Carries out one front response's actions, in order, for one turn."""

    turn: Turn
    bus: TaskBus
    delivery: Delivery
    schedule_followup: Callable[[str, str], None]
    clock: Callable[[], float] = time.time
    tools: ToolContext | None = None  # what the memory action may touch: this turn's chat and reach
    owner_id: OwnerId = None  # to tell the owner's words in the envelopes a task's context quotes
    replied: bool = False
    acted: bool = False
    labels: dict[str, str] = field(default_factory=dict)

    async def run(self, call: ToolCall) -> str:
        spec = _ACTIONS.get(call.name)
        if spec is None:
            return f"unknown action {call.name}"
        try:
            # Cleaned like every tool's arguments: a task spec or a reply is stored and sent as written.
            args = spec[1].model_validate(normalize_data(call.input, max_depth=_MAX_DEPTH))
        except NestedTooDeep:
            return f"bad arguments for {call.name}"
        except ValidationError as exc:
            log.info("front action %s had bad arguments: %s", call.name, exc.errors()[:2])
            return f"bad arguments for {call.name}"
        handler: Callable[[BaseModel], Awaitable[str]] = getattr(self, f"_{call.name}")
        try:
            note = await handler(args)
        except NotYours as exc:
            note = str(exc)
            log.info("front action %s refused: %s", call.name, note)
            await self._say(f"I can't: {note}.")  # they asked for it; silence would read as done
        except TaskError as exc:
            note = str(exc)
            log.info("front action %s: %s", call.name, note)
        self.acted = True
        return note

    # --- chat ---

    async def _reply(self, args: ReplyArgs) -> str:
        await self.delivery.say(
            self.turn.chat,
            args.text,
            reply_to=self.turn.reply_anchor,
            thread_id=self.turn.thread_id,
            turn=self.turn.turn_id,
            audience=self.turn.authority.people,
        )
        self.replied = True
        return "replied"

    async def _react(self, args: ReactArgs) -> str:
        await self.turn.perform(React(chat=self.turn.chat, message_id=args.message_id, emoji=args.emoji))
        return "reacted"

    async def _remember(self, args: RememberArgs) -> str:
        if self.tools is None:
            return "memory is not available in this conversation"
        return (await Remember().run(args, self.tools)).content

    async def _forget(self, args: ForgetArgs) -> str:
        if self.tools is None:
            return "memory is not available in this conversation"
        return (await Forget().run(args, self.tools)).content

    # --- tasks ---

    async def _spawn(self, args: SpawnArgs) -> str:
        task = await self.bus.spawn(
            self.turn.chat,
            args.spec,
            context=args.context or envelope(self.turn.batch, self.owner_id),
            label=args.label,
            origin_message=self.turn.reply_anchor,
            thread_id=self.turn.thread_id,
            attachments=self._burst_files(),
            schedule_id=scheduled_task(self.turn.batch),
            authority=self.turn.authority,
        )
        self._note_label(task, args.label)
        return f"spawned {task.id}"

    # Every operation on an existing task acts with this turn's authority: the bus refuses someone else's task.

    async def _append(self, args: AppendArgs) -> str:
        ref = self._resolve(args.task).id
        task = await self.bus.append(ref, args.context, by=self.turn.authority, attachments=self._burst_files())
        return f"appended to {task.id}"

    async def _redirect(self, args: RedirectArgs) -> str:
        task = await self.bus.redirect(self._resolve(args.task).id, args.spec, by=self.turn.authority)
        return f"redirected {task.id}"

    async def _branch(self, args: BranchArgs) -> str:
        task = await self.bus.branch(self._resolve(args.task).id, args.spec, by=self.turn.authority, label=args.label)
        self._note_label(task, args.label)
        return f"branched {task.id}"

    async def _cancel(self, args: TaskRef) -> str:
        task = await self.bus.cancel(self._resolve(args.task).id, by=self.turn.authority)
        await self._say(f"Stopped {task.name}.")
        return f"cancelled {task.id}"

    async def _status(self, args: TaskRef) -> str:
        tasks = [self._resolve(args.task)] if args.task else self._mine(self.bus.open_tasks(self.turn.chat))
        if not all(self._steerable(t) for t in tasks):
            raise NotYours("that task was asked for by someone else, so its status is theirs")
        recent = self._mine(self.bus.store.for_chat(self.turn.chat, limit=10))[-3:]
        await self._say(describe_status(tasks, self.bus.last_signal, recent, self.clock()))
        return "status sent"

    async def _wait_for_more(self, args: WaitArgs) -> str:
        self.schedule_followup(self.turn.chat, args.question)
        return "waiting"

    # --- helpers ---

    def _burst_files(self) -> tuple[Attachment, ...]:
        """The files and photos of this burst: the task they start or extend gets them, whatever the front wrote."""
        return tuple(attachment for inbound in self.turn.batch for attachment in inbound.attachments)

    async def _say(self, text: str) -> None:
        await self.delivery.say(
            self.turn.chat,
            text,
            reply_to=self.turn.reply_anchor,
            thread_id=self.turn.thread_id,
            turn=self.turn.turn_id,
            audience=self.turn.authority.people,
        )
        self.replied = True

    def _note_label(self, task: Task, label: str | None) -> None:
        self.labels[task.id.lower()] = task.id
        if label:
            self.labels[label.strip().lower()] = task.id

    def _steerable(self, task: Task) -> bool:
        return self.turn.authority.may_steer(owned_by(task))

    def _mine(self, tasks: list[Task]) -> list[Task]:
        """The tasks this turn's people may see and steer: their own, or any for the owner and group admins."""
        return [t for t in tasks if self._steerable(t)]

    def _resolve(self, ref: str | None) -> Task:
        if ref and ref.strip().lower() in self.labels:
            return self.bus.get(self.labels[ref.strip().lower()])
        if ref:
            return self.bus.find(self.turn.chat, ref)
        open_tasks = self._mine(self.bus.open_tasks(self.turn.chat))
        if len(open_tasks) == 1:
            return open_tasks[0]
        raise TaskError("no task named; " + ("none of theirs is open" if not open_tasks else f"{len(open_tasks)} are open"))
