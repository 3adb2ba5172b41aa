"""Per-chat lanes: debounce bursts into turns, one turn at a time per chat, chats in parallel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bicameral.commands.registry import Commands
from bicameral.delivery.outbox import Outbox
from bicameral.events import (
    Action,
    ActionResult,
    Authority,
    Inbound,
    OwnerId,
    Role,
    SendFile,
    SendText,
    Typing,
    authority_of,
    batch_authority,
    is_owner,
    person_key,
)
from bicameral.failures import failure_detail, failure_sentence
from bicameral.media.intake import MediaIntake
from bicameral.models.scope import enter
from bicameral.store import Stores
from bicameral.store.messages import MessageStore
from bicameral.turns.commands import answer_command, lane_memory_command, lane_schedules_command, typed_command
from bicameral.turns.turn import Turn, TurnHandler
from bicameral.types import Sleep

log = logging.getLogger(__name__)

_STOP_GRACE_SECONDS = 0.8
_NOTHING_OF_YOURS = "Nothing of yours is running. Only the owner or a group admin can stop others' requests."


@dataclass(frozen=True)
class LaneConfig:
    """What the lanes are given: who the owner is, the debounce, the turn cap and the typing pace."""

    owner_id: OwnerId
    debounce_ms: int
    max_concurrent_turns: int
    typing_delay_seconds: float  # a turn quicker than this shows no "typing…"
    typing_interval_seconds: float


@dataclass
class _Lane:
    chat: str
    pending: list[Inbound] = field(default_factory=list)
    injected: list[Inbound] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None
    turn: asyncio.Task[None] | None = None
    # Whose words the running turn carries: a message joins it only if that changes nothing.
    turn_authority: Authority = field(default_factory=lambda: Authority(Role.MEMBER))
    stop_requested: bool = False

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()

    @property
    def active(self) -> bool:
        """Running a turn, gathering a burst, or holding messages for the next turn."""
        gathering = self.timer is not None and not self.timer.done()
        return self.busy or gathering or bool(self.pending or self.injected)


class Conversation:
    """The front door of thinking: every accepted inbound is submitted here, after it was persisted."""

    def __init__(
        self,
        config: LaneConfig,
        handler: TurnHandler,
        outbox: Outbox,
        messages: MessageStore,
        *,
        lanes_per_user_in_groups: bool = False,
        typing_in_groups: bool = True,
        sleep: Sleep = asyncio.sleep,
        stores: Stores | None = None,
        media: MediaIntake | None = None,
        commands: Commands | None = None,
    ) -> None:
        self._config = config
        self._handler = handler
        self._outbox = outbox
        self._messages = messages
        self._sleep = sleep
        self._lanes_per_user_in_groups = lanes_per_user_in_groups
        self._typing_in_groups = typing_in_groups
        self._lanes: dict[str, _Lane] = {}
        self._keys: dict[str, set[str]] = {}  # each chat's lanes (a group's are its people's in two-chamber mode)
        self._slots = asyncio.Semaphore(config.max_concurrent_turns)
        self._closing = False
        self._replies: set[asyncio.Task[Any]] = set()
        self._stores = stores  # for the memory commands
        # Reads the files people send (documents, voice) inside the turn's lane: a long read holds only its chat.
        self._media = media
        # The owner's own commands: `/<name>` and `/commands` answered here; a change reloads them after a turn ends.
        self._commands = commands
        # A turn a spending cap refused: its messages are handed here, kept unanswered (console/caps.py holds them).
        self.on_capped: Callable[[list[Inbound]], None] | None = None
        self.on_idle: Callable[[], None] | None = None  # a turn ended with nothing after it (workers let the chat go)

    # --- public surface ---

    async def submit(self, inbound: Inbound) -> None:
        """Take one persisted inbound: a command acts now, a message joins a burst or the running turn."""
        if self._closing:
            return
        key = self._lane_key(inbound)
        lane = self._lanes.setdefault(key, _Lane(inbound.chat))
        self._keys.setdefault(inbound.chat, set()).add(key)
        command = inbound.command
        if command == "stop":
            await self._stop(lane, inbound)
        elif command == "reset":
            await self._reset(lane, inbound)
        elif command in ("memory", "forget") and self._stores is not None:
            await self._memory(inbound, command)
        elif command in ("reminders", "timezone") and self._stores is not None:
            await self._schedules(inbound, command)
        elif self._commands is not None and self._owner_made(inbound):
            self._answer_later(inbound, command or "")
        elif lane.busy and self._may_join(lane, inbound):
            lane.injected.append(inbound)
        elif lane.busy:
            lane.pending.append(inbound)  # someone else's words wait for a turn of their own
        else:
            lane.pending.append(inbound)
            self._schedule(lane, self._config.debounce_ms / 1000)

    async def recover(self, submit: Callable[[Inbound], Awaitable[None]] | None = None) -> int:
        """Replay inbound messages that were accepted but never answered (e.g. before a crash), through `submit`
        (what the gate hands messages to) or straight to the lanes."""
        held = self._outbox.held_rows()  # answered already; the outbox still delivers the answer
        pending = [i for i in self._messages.pending_inbound() if i.row_id not in held]
        for inbound in pending:
            await (submit or self.submit)(inbound)
        if pending:
            log.info("recovered %d unanswered message(s)", len(pending))
        return len(pending)

    async def finish(self) -> None:
        """Answer what already came in: debounced bursts start now; returns when no turn runs or waits."""
        while True:
            for lane in self._lanes.values():
                if lane.pending and not lane.busy:
                    self._schedule(lane, 0)
            waiting = [t for lane in self._lanes.values() for t in (lane.timer, lane.turn) if t is not None and not t.done()]
            if not waiting:
                return
            await asyncio.wait(waiting)

    def busy_chats(self) -> list[str]:
        return sorted({lane.chat for lane in self._lanes.values() if lane.busy})

    def active(self, chat: str) -> bool:
        """Whether a lane of the chat runs a turn, gathers a burst or holds messages for the next turn."""
        return any(self._lanes[key].active for key in self._keys.get(chat, ()))

    async def drop(self, chat: str) -> None:
        """Stop the chat's lanes without answering (another worker answers it now); its messages stay unanswered."""
        stopping = []
        for key in self._keys.pop(chat, set()):
            lane = self._lanes.pop(key)
            stopping += [task for task in (lane.timer, lane.turn) if task is not None and not task.done()]
        for task in stopping:
            task.cancel()
        await asyncio.gather(*stopping, return_exceptions=True)

    async def close(self) -> None:
        """Cancel timers and running turns; unanswered messages stay pending for the next start."""
        self._closing = True
        tasks: list[asyncio.Task[Any]] = list(self._replies)
        for reply in tasks:
            reply.cancel()
        for lane in self._lanes.values():
            for task in (lane.timer, lane.turn):
                if task is not None and not task.done():
                    task.cancel()
                    tasks.append(task)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # --- debounce and turns ---

    def _may_join(self, lane: _Lane, inbound: Inbound) -> bool:
        """A message joins the running turn only if it neither lowers nor widens whose words the turn carries."""
        if self._media is not None and self._media.unread(inbound):
            return False  # its files are read before the turn that answers it, never half-way through one
        mine = authority_of(inbound, self._config.owner_id)
        return lane.turn_authority.joined(mine) == lane.turn_authority

    def _lane_key(self, inbound: Inbound) -> str:
        """A chat's lane; in groups (two-chamber mode) one per person and topic, so people don't merge."""
        if inbound.is_private or not self._lanes_per_user_in_groups:
            return inbound.chat
        return f"{inbound.chat}|{inbound.sender.id}|{inbound.thread_id or ''}"

    def _schedule(self, lane: _Lane, delay: float) -> None:
        if lane.timer is not None and not lane.timer.done():
            lane.timer.cancel()
        lane.timer = asyncio.create_task(self._after_quiet(lane, delay))

    async def _after_quiet(self, lane: _Lane, delay: float) -> None:
        await self._sleep(delay)
        lane.timer = None
        if lane.busy or not lane.pending:
            return
        batch, lane.pending = lane.pending, []
        lane.stop_requested = False
        lane.turn_authority = batch_authority(batch, self._config.owner_id)
        lane.turn = asyncio.create_task(self._run_turn(lane, batch), name=f"turn:{lane.chat}")

    async def _run_turn(self, lane: _Lane, batch: list[Inbound]) -> None:
        # Set in this turn's own asyncio task: its model calls, and those of what it starts, count for this chat and
        # for the people whose words it carries.
        audience = lane.turn_authority.people
        spender = enter(lane.chat, audience)
        handed: list[Inbound] = []
        turn_id = uuid.uuid4().hex[:12]

        def drain() -> list[Inbound]:
            items, lane.injected = lane.injected, []
            handed.extend(items)
            return items

        async def perform(action: Action, answers: Sequence[int] = ()) -> ActionResult:
            if isinstance(action, SendText | SendFile) and not action.audience:
                action = replace(action, audience=audience)  # what it answers is theirs to have edited or deleted
            return await self._outbox.perform(action, turn=turn_id, answers=answers)

        turn = Turn(
            chat=lane.chat,
            turn_id=turn_id,
            batch=batch,
            perform=perform,
            rows=lambda: [i.row_id for i in batch + handed if i.row_id is not None],
            answer=lambda action: perform(action, turn.rows()),
            drain_injected=drain,
            authority=lane.turn_authority,
            personal=batch[-1].is_private or self._lanes_per_user_in_groups,
        )
        # In groups the two-chamber front shows typing only when it is about to send.
        show_typing = batch[-1].is_private or self._typing_in_groups
        typing = asyncio.create_task(self._keep_typing(turn)) if show_typing else None
        finished = False
        try:
            async with self._slots:
                if self._media is not None:
                    batch[:] = await self._media.read_batch(batch)  # the turn holds this very list
                log.info("turn %s in %s: %d message(s)", turn.turn_id, lane.chat, len(batch))
                await self._handler.handle(turn)
            finished = True
        except asyncio.CancelledError:
            finished = lane.stop_requested
            if not finished:
                raise
        except Exception as exc:
            log.error("turn %s in %s failed: %s", turn.turn_id, lane.chat, failure_detail(exc))
            await turn.send_answer(SendText(chat=lane.chat, text=failure_sentence("internal"), reply_to=turn.reply_anchor))
            finished = True
        finally:
            if typing is not None:
                typing.cancel()
            if self._commands is not None:
                self._commands.turn_ended()  # a command changed in this turn loads now its reply has gone out
            if finished and spender.capped and self.on_capped is not None:
                self.on_capped(batch + handed)  # told in one sentence; answered once the owner allows more
            elif finished:
                # Not answered yet if the final message still waits in the outbox; a crash before the
                # turn finished leaves the batch pending, so an interim "on it" cannot swallow it.
                self._outbox.settle(turn.turn_id, [i.row_id for i in batch + handed])
        if (lane.injected or lane.pending) and not self._closing:
            # Messages that missed the turn's last tool boundary, or waited for a turn of their own, go next.
            lane.pending.extend(lane.injected)
            lane.injected = []
            self._schedule(lane, 0)
        elif self.on_idle is not None:
            self.on_idle()

    async def _keep_typing(self, turn: Turn) -> None:
        await self._sleep(self._config.typing_delay_seconds)
        while True:
            await self._outbox.perform(Typing(chat=turn.chat, thread_id=turn.thread_id))
            await self._sleep(self._config.typing_interval_seconds)

    # --- commands ---

    def _may_manage(self, inbound: Inbound) -> bool:
        """Whether the sender may stop others' work and reset the chat: DMs, the owner, group admins."""
        return inbound.is_private or inbound.sender.is_admin or is_owner(inbound, self._config.owner_id)

    async def _stop(self, lane: _Lane, inbound: Inbound) -> None:
        if not self._may_manage(inbound):
            await self._stop_own(lane, inbound)
            return
        cancelled: list[Inbound] = []
        running = False
        # With a lane per person in groups, the owner's /stop reaches everyone's lane in the chat.
        for each in [self._lanes[key] for key in self._keys.get(lane.chat, ())]:
            cancelled += each.pending
            each.pending = []
            if each.timer is not None:
                each.timer.cancel()
            running = each.busy or running
            await self._cancel_turn(each)
        running = await self._handler.interrupt(lane.chat) or running
        self._messages.mark_consumed([inbound.row_id, *(i.row_id for i in cancelled)])
        await self._say(inbound, "Stopped." if running or cancelled else "Nothing is running.")

    async def _stop_own(self, lane: _Lane, inbound: Inbound) -> None:
        """A group member's /stop: their own waiting messages and a turn only they started, nothing else."""
        me = person_key(inbound)
        cancelled = [i for i in lane.pending if person_key(i) == me]
        lane.pending = [i for i in lane.pending if person_key(i) != me]
        if not lane.pending and lane.timer is not None:
            lane.timer.cancel()
        own_turn = lane.busy and lane.turn_authority.people == (me,)
        if own_turn:
            await self._cancel_turn(lane)
        own_work = await self._handler.interrupt(lane.chat, by=authority_of(inbound, self._config.owner_id))
        self._messages.mark_consumed([inbound.row_id, *(i.row_id for i in cancelled)])
        # Others' work may run in their own lanes or as tasks; either way it is not this person's to stop.
        text = "Stopped." if own_turn or cancelled or own_work else _NOTHING_OF_YOURS
        await self._say(inbound, text)

    async def _reset(self, lane: _Lane, inbound: Inbound) -> None:
        if not self._may_manage(inbound):
            self._messages.mark_consumed([inbound.row_id])
            await self._say(inbound, "Only the owner or a group admin can reset this group's conversation.")
            return
        await self._cancel_turn(lane)
        lane.pending = []
        self._handler.reset(lane.chat)
        self._messages.mark_consumed([inbound.row_id])
        await self._say(inbound, "Fresh start: I cleared our conversation. Saved notes and files are kept.")

    async def _memory(self, inbound: Inbound, command: str) -> None:
        """/memory [stats] and /forget <id or words>: answered at once, never queued behind a turn."""
        assert self._stores is not None
        personal = inbound.is_private or self._lanes_per_user_in_groups
        text = lane_memory_command(self._stores, inbound, command, personal, self._config.owner_id)
        self._messages.mark_consumed([inbound.row_id])
        await self._say(inbound, text)

    async def _schedules(self, inbound: Inbound, command: str) -> None:
        """/reminders [pause|resume|cancel <n>] and /timezone [Area/City]: answered at once, never queued."""
        assert self._stores is not None
        text = lane_schedules_command(self._stores.schedules, inbound, command, self._config.owner_id, time.time())
        self._messages.mark_consumed([inbound.row_id])
        await self._say(inbound, text)

    def _owner_made(self, inbound: Inbound) -> bool:
        """`/commands`, or `/<name>` of a loaded command, typed just now."""
        typed = typed_command(inbound)
        return typed is not None and self._commands is not None and self._commands.answers(typed[0])

    def _answer_later(self, inbound: Inbound, command: str) -> None:
        """Run it in the background (a command may take its whole time limit); never queued behind a turn."""
        assert self._commands is not None
        self._messages.mark_consumed([inbound.row_id])
        owner = is_owner(inbound, self._config.owner_id)
        answer = asyncio.create_task(self._say_when(inbound, answer_command(self._commands, inbound, command, owner=owner)))
        self._replies.add(answer)
        answer.add_done_callback(self._replies.discard)

    async def _say_when(self, inbound: Inbound, text: Awaitable[str]) -> None:
        await self._say(inbound, await text)

    async def _cancel_turn(self, lane: _Lane) -> None:
        if lane.busy and lane.turn is not None:
            lane.stop_requested = True
            lane.turn.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(lane.turn), _STOP_GRACE_SECONDS)

    async def _say(self, inbound: Inbound, text: str) -> None:
        """Answer a command in the background: a slow or rate-limited send must not hold up intake."""
        reply_to = None if inbound.is_private else inbound.message_id
        action = SendText(
            chat=inbound.chat, text=text, reply_to=reply_to, thread_id=inbound.thread_id, audience=(person_key(inbound),)
        )
        reply = asyncio.create_task(self._outbox.perform(action), name=f"command-reply:{inbound.chat}")
        self._replies.add(reply)
        reply.add_done_callback(self._replies.discard)
