"""The front chamber: one front-model call per burst, task events turned into the assistant's voice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bicameral import prompts
from bicameral.context.envelope import content_blocks
from bicameral.context.extraction import FactExtractor
from bicameral.context.memory import memory_blocks
from bicameral.delivery.drafts import Drafting, DraftStream
from bicameral.delivery.outbox import Outbox
from bicameral.events import Authority, OwnerId, SendFile, chat_key, sender_role
from bicameral.failures import failure_sentence, task_failed
from bicameral.front.actions import FrontActions, front_tool_specs
from bicameral.front.delivery import Delivery
from bicameral.front.status import ago, duration
from bicameral.markup import escape, quoteattr
from bicameral.models.base import Completion, Message, Model, ModelError, TextBlock, complete
from bicameral.models.metered import CAP
from bicameral.models.scope import gave_up_on_cap
from bicameral.sandbox.artifacts import SendLimits, available
from bicameral.scheduler.retry import FireRetry, gave_up, scheduled_task
from bicameral.store import Stores
from bicameral.tasks.bus import TaskBus, owned_by
from bicameral.tasks.executor import Executor
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import NOTHING_TO_REPORT, EventKind, Task, TaskEvent, TaskState
from bicameral.turns.turn import Turn

log = logging.getLogger(__name__)

_RESET_KEY = "front_reset_at:"


@dataclass(frozen=True)
class FrontConfig:
    """What the front is given: who the bot and its owner are, where files live and how many a turn may send,
    what the front call sees and may write, how results and status notes are worded and paced, when the user
    counts as away, how tasks are retried."""

    bot_name: str
    owner_id: OwnerId
    data_dir: Path
    sending: SendLimits
    memory_inject_tokens: int
    memory_extraction: bool
    front_max_tokens: int
    front_context_messages: int
    short_result_chars: int
    delivery_pause_scale: float
    status_interval_seconds: float
    progress_interval_seconds: float
    away_after_seconds: float
    burst_followup_seconds: float
    task_max_attempts: int
    task_retry_delay_seconds: float
    scheduled_retry: FireRetry


class FrontChamber:
    """The TurnHandler for `bicameral` mode; owns the task bus and everything the user hears from it."""

    def __init__(
        self,
        config: FrontConfig,
        stores: Stores,
        tasks: TaskStore,
        front_model: Model,
        executor: Executor,
        outbox: Outbox,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        resume_at_start: bool = True,  # False when workers share the database: each resumes the chats it takes
    ) -> None:
        self._config = config
        self._resume_at_start = resume_at_start
        self._stores = stores
        self._tasks = tasks
        self._model = front_model
        self._clock = clock
        self._rng = rng or random.Random()
        self._sleep = sleep
        self.delivery = Delivery(
            outbox,
            front_model,
            bot_name=config.bot_name,
            pause_scale=config.delivery_pause_scale,
            rng=self._rng,
            sleep=sleep,
        )
        self._executor = executor
        self._retry = config.scheduled_retry
        self.bus = TaskBus(
            tasks,
            executor,
            on_event=self.on_task_event,
            clock=clock,
            sleep=sleep,
            progress_interval=config.progress_interval_seconds,
            max_attempts=config.task_max_attempts,
            retry_delay=config.task_retry_delay_seconds,
            scheduled_retry=self._retry,
        )
        self._template = prompts.load("front.md")
        self._extractor = FactExtractor(front_model, stores.memory) if config.memory_extraction else None
        self._notes_loop: asyncio.Task[None] | None = None
        self._last_note: dict[str, float] = {}
        self._delivering: set[str] = set()  # results being worded now: a turn's catch-up must not send them too

    # --- TurnHandler ---

    async def start(self) -> None:
        await self._executor.start()
        resumed = await self.bus.resume_open() if self._resume_at_start else 0
        if resumed:
            log.info("resumed %d open task(s)", resumed)
        self._notes_loop = asyncio.create_task(self._status_notes())

    async def stop(self) -> None:
        if self._notes_loop is not None:
            self._notes_loop.cancel()
        await self.bus.close()
        await self._executor.stop()
        if self._extractor is not None:
            await self._extractor.close()

    async def finish(self) -> None:
        """Let running tasks end and their results be written (the input ended; the app stops next)."""
        await self.bus.finish()

    def reset(self, chat: str) -> None:
        self._stores.kv.set(_RESET_KEY + chat, repr(self._clock()))

    async def interrupt(self, chat: str, by: Authority | None = None) -> bool:
        if by is None:
            self._stores.schedules.drop_followup(chat)
        theirs = [t for t in self.bus.open_tasks(chat) if by is None or by.may_steer(owned_by(t))]
        stopped = [await self.bus.cancel(task.id, by=by) for task in theirs]
        return bool(stopped)

    async def handle(self, turn: Turn) -> None:
        # The front's text is the reply (unless a `reply` action spoke): it shows while it is written where the
        # channel shows drafts.
        async with DraftStream(turn.perform, turn.chat, turn.turn_id) as draft:
            await self._answer(turn, draft)

    async def _answer(self, turn: Turn, draft: DraftStream) -> None:
        model = Drafting(self._model, draft, final_only=False)
        waiting = self._stores.schedules.drop_followup(turn.chat)  # they spoke: the question is not asked
        # The system prompt stays constant (cacheable); everything that changes rides in the user turn.
        system = self._template.format(bot_name=self._config.bot_name)
        situation = TextBlock(text=f"<situation>\n{self._context(turn, waiting)}\n</situation>")
        remembered = await memory_blocks(self._stores, turn.reach, turn.batch, self._config.memory_inject_tokens)
        user = Message(role="user", content=[situation, *remembered, *content_blocks(turn.batch, self._config.owner_id)])
        schedule_id = scheduled_task(turn.batch)

        async def attempt(_: Completion | ModelError | None) -> Completion | ModelError:
            try:
                return await complete(model, system, [user], front_tool_specs(), self._config.front_max_tokens)
            except ModelError as exc:
                log.warning("front model failed (%s): %s", exc.kind, exc)
                return exc

        if schedule_id is None:
            completion, tries = await attempt(None), 1
        else:  # nobody is waiting on a scheduled task: worth a patient retry before telling them it failed
            completion, tries = await self._retry.run(
                attempt, lambda c: isinstance(c, ModelError) and c.kind != CAP, sleep=self._sleep
            )
        if isinstance(completion, ModelError):
            text = failure_sentence(completion.kind)
            if completion.kind == CAP:
                gave_up_on_cap()
            if schedule_id is not None:
                text = gave_up(schedule_id, text, tries, self._stores.schedules)
            await self.delivery.say(
                turn.chat, text, reply_to=turn.reply_anchor, turn=turn.turn_id, audience=turn.authority.people,
                answers=turn.rows(),
            )
            return
        replied = False
        if completion.tool_calls:  # most answers are words alone: no actions, and no tool context to build
            tools = turn.tool_context(self._stores, self._config.data_dir, self._config.sending)
            actions = FrontActions(
                turn, self.bus, self.delivery, self._schedule_followup, self._clock, tools, self._config.owner_id
            )
            for call in completion.tool_calls:
                note = await actions.run(call)
                log.info("front %s in %s: %s", call.name, turn.chat, note)
            replied = actions.replied
        text = completion.text.strip()
        await draft.settle()  # nothing more of the draft: the reply takes its place
        # Only these words, said after every action ran, hold the turn's messages when recorded: a `reply` action
        # said before a task it starts is stored would otherwise leave a restart with the words and no task.
        if text and not replied:
            await self.delivery.say(
                turn.chat,
                text,
                reply_to=turn.reply_anchor,
                thread_id=turn.thread_id,
                turn=turn.turn_id,
                audience=turn.authority.people,
                draft=draft.key,
                answers=turn.rows(),
            )
        await self._deliver_waiting(turn.chat)
        if self._extractor is not None:
            self._extractor.schedule(turn.reach, turn.batch, text)  # in the background, after the answer

    # --- task events: the only source of what the user hears about work ---

    async def on_task_event(self, task: Task, event: TaskEvent) -> None:
        if event.kind is EventKind.COMPLETED:
            if self._user_away(task.chat):
                log.info("task %s finished while the user is away; holding it", task.id)
                return
            await self._deliver(task)
        elif event.kind is EventKind.FAILED:
            await self._deliver(task)
        elif event.kind is EventKind.RETRYING and task.schedule_id is None:  # nobody waits on a scheduled one
            seconds = max(5, int(self.bus.retry_delay))
            await self._say(task, f"Hit a snag with {task.name}, retrying (~{seconds}s).")

    # --- delivery paths ---

    async def _deliver(self, task: Task, *, finished_ago: str | None = None) -> None:
        """Tell the chat a finished task's outcome once: never twice, even when a turn catches up meanwhile."""
        if task.id in self._delivering:
            return
        self._delivering.add(task.id)
        try:
            current = self._tasks.get(task.id)
            # The mark is durable (set when the words are in the outbox), so a restart never repeats one.
            if current is not None and current.delivered_at is None:
                await self._word(current, finished_ago)
        finally:
            self._delivering.discard(task.id)

    async def _word(self, task: Task, finished_ago: str | None) -> None:
        if task.state is TaskState.FAILED:
            reason = task.error or failure_sentence(None)
            if task.schedule_id is not None:
                text = gave_up(task.schedule_id, reason, task.attempts, self._stores.schedules)
            else:
                text = task_failed(task.name, reason)
            await self._say(task, text, delivered=True)
            return
        result = task.result or ""
        files = [a for a in task.artifacts if available(self._config.data_dir, a)]
        if task.artifacts and (not result.strip() or result == NOTHING_TO_REPORT):
            result = "Here's " + ", ".join(a.name for a in task.artifacts) + "."  # the one-line framing
        lost = [a.name for a in task.artifacts if a not in files]
        if lost:
            log.warning("task %s: files no longer available: %s", task.id, lost)
            result += "\n\n(" + ", ".join(lost) + " could not be found any more, so it is not attached.)"
        if len(result) <= self._config.short_result_chars and finished_ago is None:
            text = await self.delivery.shim(result)
        else:
            text = await self.delivery.frame(task.spec, result)
            if finished_ago:
                # Reintroduce from real data: what it was and when it finished, before the substance.
                text = f"Oh hey, I finished {task.name} {finished_ago}.\n\n{text}"
        audience = owned_by(task).people
        sends = [SendFile(task.chat, a.path, a.kind, thread_id=task.thread_id, audience=audience) for a in files]
        await self._say(task, text, delivered=True, files=sends)

    async def _deliver_waiting(self, chat: str) -> None:
        """Results that finished while the user was away, reintroduced now that they are back."""
        for task in self._tasks.undelivered(chat):
            await self._deliver(task, finished_ago=ago(self._clock() - (task.finished_at or task.updated_at)))

    async def _say(self, task: Task, text: str, *, delivered: bool = False, files: Sequence[SendFile] = ()) -> None:
        """Tell the task's chat; with `delivered`, the task counts as delivered once the words are in the outbox."""

        def mark_delivered() -> None:
            self._tasks.update(task.id, delivered_at=self._clock())

        on_recorded = mark_delivered if delivered else None
        await self.delivery.say(
            task.chat,
            text,
            reply_to=task.origin_message,
            thread_id=task.thread_id,
            on_recorded=on_recorded,
            files=files,
            audience=owned_by(task).people,
        )

    # --- context ---

    def _context(self, turn: Turn, followup_waiting: bool) -> str:
        now = self._clock()
        since = float(self._stores.kv.get(_RESET_KEY + turn.chat) or 0)
        row_ids = {i.row_id for i in turn.batch}
        history = [
            m for m in self._stores.messages.recent_since(turn.chat, since, self._config.front_context_messages + len(row_ids))
            if not (m["direction"] == "in" and m["status"] == "pending")
        ][-self._config.front_context_messages :]
        lines = [f"Now: {datetime.fromtimestamp(now, UTC):%Y-%m-%d %H:%M} UTC."]
        if history:
            lines.append("<conversation>")
            lines += [self._earlier(m, now) for m in history]
            lines.append("</conversation>")
        every_open = self.bus.open_tasks(turn.chat)
        open_tasks = [t for t in every_open if turn.authority.may_steer(owned_by(t))]
        if len(every_open) > len(open_tasks):
            # Others' work is theirs: its words are not shown, and these people cannot steer it.
            lines.append(f"<others_tasks>{len(every_open) - len(open_tasks)} running for other people</others_tasks>")
        if open_tasks:
            lines.append("<open_tasks>")
            for task in open_tasks:
                signal = self.bus.last_signal(task.id)
                state = f"{signal.kind.value} {ago(now - signal.ts)}" if signal else task.state.value
                lines.append(
                    f"- id={task.id} label={task.label or '-'} state={task.state.value} last_signal={state}: {task.spec[:300]}"
                )
            lines.append("</open_tasks>")
        else:
            lines.append("<open_tasks>none</open_tasks>")
        waiting = self._tasks.undelivered(turn.chat)
        if waiting:
            lines.append("<finished_while_away> (they will be delivered right after your reply; just greet, don't repeat them)")
            lines += [f"- {t.name}, finished {ago(now - (t.finished_at or t.updated_at))}" for t in waiting]
            lines.append("</finished_while_away>")
        if followup_waiting:
            lines.append("<pending_followup>you were waiting for the user to finish a thought</pending_followup>")
        last_out = next((m for m in reversed(history) if m["direction"] == "out"), None)
        if last_out:
            lines.append(f"Your last message was sent {ago(now - last_out['created_at'])}.")
        return "\n".join(lines)

    def _earlier(self, row: dict[str, Any], now: float) -> str:
        """One earlier message, escaped like the current ones: no name or text can pose as another message."""
        attrs = {"time": ago(now - row["created_at"])}
        if row["direction"] == "out":
            attrs["from"] = "you"
        else:
            role = sender_role(row["channel"], row["sender_id"], self._config.owner_id, admin=bool(row["is_admin"]))
            attrs["from"] = row["sender_name"] or "someone"
            attrs["sender"] = chat_key(row["channel"], row["sender_id"])
            attrs["role"] = role.name.lower()
            if row["status"] == "ignored":
                attrs["overheard"] = "true"
        head = " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items())
        return f"<msg {head}>{escape(row['text'][:500])}</msg>"

    def _user_away(self, chat: str) -> bool:
        last = self._stores.messages.last_inbound_at(chat)
        return last is not None and self._clock() - last > self._config.away_after_seconds

    # --- follow-ups and status notes ---

    def _schedule_followup(self, chat: str, question: str) -> None:
        """A schedule, not a sleeping task: the question survives a restart and the scheduler's one timer asks it."""
        now = self._clock()
        delay = self._config.burst_followup_seconds * self._rng.uniform(0.75, 1.25)
        self._stores.schedules.set_followup(chat, question, due=now + delay, now=now)

    async def _status_notes(self) -> None:
        """While a long task runs, tell its chat how it is going every status interval (real signals)."""
        interval = self._config.status_interval_seconds
        while True:
            await self._sleep(max(1.0, interval / 4))
            now = self._clock()
            for task in self._tasks.open_tasks():
                since = self._last_note.get(task.id, task.created_at)
                if now - since < interval:
                    continue
                self._last_note[task.id] = now
                signal = self.bus.last_signal(task.id)
                step = f"last step: {signal.data} ({ago(now - signal.ts)})" if signal and signal.data else "no step reported yet"
                with contextlib.suppress(Exception):
                    await self._say(task, f"Still on {task.name} ({duration(now - task.created_at)} so far), {step}.")
