"""Turns shared by the workers of one PostgreSQL database: each chat's work leased to one worker at a time.

The serving worker (the one that polls Telegram) records each accepted message as it always did, and signals its chat
in `chat_queue`. Every worker, the serving one too, takes the signals of the chats it can lease and answers their
unanswered messages through its own intake, in order. While a chat has work here (a turn, a burst being gathered, a
task, messages a spending cap holds), its lease is renewed; when the work is done it is let go. A worker killed or
paused past its lease loses the chat: another takes it over from the stored messages and task checkpoints, and the
late worker's results are dropped at the outbox (`fence`), never sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bicameral.events import Inbound
from bicameral.store.chat_queue import ChatQueue
from bicameral.store.leases import Lease, LeaseStore
from bicameral.store.messages import MessageStore
from bicameral.store.sql import Connection
from bicameral.types import Clock

log = logging.getLogger(__name__)

TAKE_BATCH = 16  # chats taken in one go: small enough that workers woken together share a burst of chats


@dataclass(frozen=True)
class SharingConfig:
    worker: str  # unique per process: the leases' holder
    lease_seconds: float
    channels: frozenset[str]  # the channels this worker can send on: it leases only their chats
    capacity: int  # chats it takes at once


@dataclass(frozen=True)
class LocalWork:
    """What the worker's own parts say and do about a chat."""

    intake: Callable[[Inbound], Awaitable[None]]  # a message's way in on this worker (questions, console, lanes)
    busy: Callable[[str], bool]  # a turn, a burst, a task or a held message of the chat here
    drop: Callable[[str], Awaitable[None]]  # stop the chat's work here without answering (the lease was lost)
    resume: Callable[[str], Awaitable[int]]  # restart the chat's open tasks from their checkpoints
    held_rows: Callable[[str], set[int]]  # the chat's inbound rows whose answer waits in the outbox: answered already
    tick: Callable[[], Awaitable[None]]  # now and then: changes another worker made (a /resume); this one's claims kept
    release: Callable[[str], Awaitable[None]]  # the chat was let go or dropped: what is kept of it here ends


class SharedTurns:
    """Signals, takes, renews and lets go of chats; the fence the outbox asks before it records a chat's result."""

    def __init__(
        self, config: SharingConfig, queue: ChatQueue, leases: LeaseStore, messages: MessageStore,
        *, clock: Clock = time.time,
    ) -> None:
        self._config = config
        self._queue = queue
        self._leases = leases
        self._messages = messages
        self._clock = clock
        self._work: LocalWork | None = None
        self._held: dict[str, Lease] = {}
        self._lost: dict[str, Lease] = {}  # taken over by another worker, work here still stopping: results dropped
        self._seen: dict[str, set[int]] = {}  # rows handed to this worker's intake while it holds the chat
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def worker(self) -> str:
        return self._config.worker

    def attach(self, work: LocalWork) -> None:
        self._work = work

    async def start(self) -> None:
        """Take what waits now (and what a stopped worker left), then keep taking as signals arrive."""
        self._loop = asyncio.create_task(self._run(), name="shared-turns")

    async def stop(self) -> None:
        """Stop taking work and let every chat go, so other workers take it over at once."""
        self._stopping = True  # a cancel the intake swallows (a /stop's grace wait) still ends the loop
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        self._lost.update(self._held)  # a turn still ending here must not record a result for these chats now
        with contextlib.suppress(Exception):
            self._leases.release(list(self._held.values()))
        self._held.clear()

    async def dispatch(self, inbound: Inbound) -> None:
        """The serving worker's gate hands each accepted message here: its chat is signalled to every worker."""
        self._queue.signal([(inbound.chat, inbound.channel)])
        self.wake()

    def wake(self) -> None:
        """Another worker signalled work (PostgreSQL's NOTIFY), or this one did."""
        self._wake.set()

    def fence(self, conn: Connection, chat: str) -> bool:
        """Inside the transaction that records a chat's result: False when this worker lost the chat to another."""
        lease = self._held.get(chat) or self._lost.get(chat)
        if lease is None:
            return True  # not a leased chat's work (a reminder, a notice to the owner): nothing to fence
        return self._leases.holds(conn, lease, self._clock())

    # --- the loop ---

    async def _run(self) -> None:
        tick = self._config.lease_seconds / 3
        next_tick = 0.0
        while not self._stopping:
            self._wake.clear()
            try:
                await self._let_go_of_idle()
                if self._clock() >= next_tick:
                    assert self._work is not None
                    await self._work.tick()
                    await self._renew()
                    self._queue.signal_orphans(self._clock())
                    next_tick = self._clock() + tick
                if await self._take():
                    self._wake.set()  # a full batch: there may be more, and other workers take their share meanwhile
            except asyncio.CancelledError:
                raise
            except Exception:  # the database away for a moment: the next signal or tick tries again
                log.exception("shared turns: taking work failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.05, next_tick - self._clock()))

    async def _take(self) -> bool:
        """Take what waits for the chats held here and a batch of new ones; True when the batch was full."""
        room = min(max(0, self._config.capacity - len(self._held)), TAKE_BATCH)
        leases = self._queue.take(self.worker, self._config.channels, self._clock(), self._config.lease_seconds, room)
        fresh = sum(lease.chat not in self._held for lease in leases)
        for lease in leases:
            await self._adopt(lease)
        return fresh >= TAKE_BATCH

    async def _adopt(self, lease: Lease) -> None:
        """The chat is this worker's: its unanswered messages go to the intake, in order, each once."""
        assert self._work is not None
        new = lease.chat not in self._held
        self._held[lease.chat] = lease
        self._lost.pop(lease.chat, None)
        seen = self._seen.setdefault(lease.chat, set())
        held = self._work.held_rows(lease.chat)
        waiting = [i for i in self._messages.pending_inbound(lease.chat) if i.row_id not in held and i.row_id not in seen]
        if new:
            log.info("chat %s taken by this worker (lease %d): %d message(s)", lease.chat, lease.epoch, len(waiting))
            resumed = await self._work.resume(lease.chat)
            if resumed:
                log.info("resumed %d open task(s) of %s", resumed, lease.chat)
        for inbound in waiting:
            if inbound.row_id is not None:
                seen.add(inbound.row_id)
            try:
                await self._work.intake(inbound)
            except Exception:
                log.exception("shared turns: message %s of %s could not be taken in", inbound.row_id, lease.chat)

    async def _let_go_of_idle(self) -> None:
        """Chats with no work left here are let go, so any worker may take their next message."""
        assert self._work is not None
        idle = [lease for chat, lease in self._held.items() if not self._work.busy(chat)]
        for lease in idle:
            await self._released(lease.chat)  # first: no other worker resumes the chat while this one keeps it live
        self._leases.release(idle)
        for lease in idle:
            del self._held[lease.chat]
            self._seen.pop(lease.chat, None)

    async def _released(self, chat: str) -> None:
        """What this worker keeps of a chat it no longer holds ends (its next turn may run anywhere)."""
        assert self._work is not None
        try:
            await self._work.release(chat)
        except Exception:
            log.exception("shared turns: releasing %s here failed", chat)

    async def _renew(self) -> None:
        """Renew the leases of chats with work here; stop what a lost lease covered."""
        assert self._work is not None
        now, ttl = self._clock(), self._config.lease_seconds
        renewed_all = self._leases.renew(list(self._held.values()), now, ttl)
        self._held.update(renewed_all)
        for chat, lease in [(chat, lease) for chat, lease in self._held.items() if chat not in renewed_all]:
            # Run out but taken by nobody (this loop was slow, the machine paused): still ours. Taken and let go by
            # another worker (its row gone) is lost all the same: that worker answered what this one holds.
            renewed = self._leases.revive(lease, now, ttl)
            if renewed is not None:
                self._held[chat] = renewed
                continue
            log.warning("chat %s: this worker's lease ran out and another worker took it; its work here stops", chat)
            del self._held[chat]
            self._lost[chat] = lease
            self._seen.pop(chat, None)
            await self._work.drop(chat)
            await self._released(chat)
            self._lost.pop(chat, None)  # its late work is stopped: what this worker sends the chat now (a reminder) goes
