"""Wake-ups between workers: PostgreSQL's LISTEN on the work channel, on an async connection of its own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bicameral.backoff import backoff_delay
from bicameral.store.chat_queue import WORK_CHANNEL

log = logging.getLogger(__name__)


async def listen_for_work(url: str, on_wake: Callable[[], None], *, retry_cap: float = 30.0) -> None:
    """Call `on_wake` at each NOTIFY on the work channel, until cancelled; a lost connection is opened again (and
    `on_wake` called, for what was signalled meanwhile). Waits on the socket: an idle worker costs nothing here."""
    import psycopg

    failures = 0
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f"LISTEN {WORK_CHANNEL}")
                if failures:
                    log.info("listening for other workers' signals again")
                    on_wake()
                failures = 0
                async for _ in conn.notifies():
                    on_wake()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures += 1
            delay = backoff_delay(1.0, retry_cap, failures)
            log.warning("the wake-up connection failed (%s); again in %.0fs", type(exc).__name__, delay)
            await asyncio.sleep(delay)
