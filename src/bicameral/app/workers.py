"""With PostgreSQL: this worker's share of the chats, built from the settings (its leases, its wake-ups)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence

from bicameral.channels.base import Channel
from bicameral.config import Settings
from bicameral.console.caps import CapDesk
from bicameral.console.desk import Console
from bicameral.delivery.outbox import Outbox
from bicameral.delivery.router import ActionRouter
from bicameral.events import Inbound
from bicameral.front.chamber import FrontChamber
from bicameral.store import Stores
from bicameral.store.chat_queue import ChatQueue
from bicameral.store.leases import LeaseStore
from bicameral.store.wakeups import listen_for_work
from bicameral.tasks.store import OPEN_STATES
from bicameral.turns.lanes import Conversation
from bicameral.turns.sharing import LocalWork, SharedTurns, SharingConfig
from bicameral.turns.turn import KeepsChats, TurnHandler
from bicameral.types import Clock


def worker_id() -> str:
    """Unique per process, readable in the leases table: host, pid and a random tail (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def shared_turns(settings: Settings, stores: Stores, channels: Sequence[Channel], clock: Clock) -> SharedTurns | None:
    """The chats' leases when workers share a PostgreSQL database; None with SQLite (one process answers all)."""
    if settings.database_url is None:
        return None
    leases = LeaseStore(stores.db)
    config = SharingConfig(
        worker=worker_id(),
        lease_seconds=settings.chat_lease_seconds,
        channels=frozenset(channel.name for channel in channels),
        capacity=settings.max_concurrent_turns,
    )
    return SharedTurns(config, ChatQueue(stores.db, leases, open_task_states=OPEN_STATES), leases, stores.messages, clock=clock)


def local_work(
    intake: Callable[[Inbound], Awaitable[None]], conversation: Conversation, handler: TurnHandler, caps: CapDesk,
    console: Console, outbox: Outbox,
) -> LocalWork:
    """What this worker does with a chat it takes, and how it tells whether the chat still has work here."""
    bus = handler.bus if isinstance(handler, FrontChamber) else None

    def busy(chat: str) -> bool:
        held = caps.holds(chat) or console.holds(chat)  # kept here until the owner allows more or resumes
        return conversation.active(chat) or held or (bus is not None and bus.drives(chat))

    async def drop(chat: str) -> None:
        await conversation.drop(chat)
        if bus is not None:
            await bus.close(chat)

    async def resume(chat: str) -> int:
        return await bus.resume_open(chat) if bus is not None else 0

    async def tick() -> None:  # what other workers changed (the pause, spending, allowances); this one's claims
        await console.resume_if_resumed()
        await caps.reread()
        outbox.renew_claims()

    async def release(chat: str) -> None:  # another worker may answer the chat next: nothing of it may go stale here
        if isinstance(handler, KeepsChats):
            await handler.release(chat)

    return LocalWork(intake=intake, busy=busy, drop=drop, resume=resume, held_rows=outbox.held_rows, tick=tick,
                     release=release)


def dispatcher(sharing: SharedTurns, router: ActionRouter) -> Callable[[Inbound], Awaitable[None]]:
    """What the serving worker's gate hands accepted messages to: their chat signalled to every worker; a press is
    left for the worker that takes it to answer (the channel would otherwise answer it at once, with nothing)."""

    async def dispatch(inbound: Inbound) -> None:
        router.answered_later(inbound)
        await sharing.dispatch(inbound)

    return dispatch


class Wakeups:
    """The LISTEN connection that wakes this worker when another one signals work."""

    def __init__(self, settings: Settings, sharing: SharedTurns) -> None:
        assert settings.database_url is not None
        url = settings.database_url.get_secret_value()
        self._task = asyncio.create_task(listen_for_work(url, sharing.wake), name="work-wakeups")

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
