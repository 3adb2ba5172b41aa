"""Blocking tool work runs in a thread pool of its own, a few threads per chat at most.

Turns need threads too (memory lookups run beside the event loop once they are slow), so a tool's
work never takes the default pool: one chat's heavy searches or queries wait for each other, not for
everyone's. A thread cannot be killed, so a call that timed out keeps its chat's slot until its work
really ends; the work itself is bounded (regex and SQL time limits), and what may run away entirely
goes to a child process that can be killed instead (see web/extract.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

POOL_THREADS = 4
PER_CHAT = 2

_pool: concurrent.futures.ThreadPoolExecutor | None = None
# Per event loop (a semaphore belongs to one), per chat.
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = weakref.WeakKeyDictionary()


async def in_tool_thread(chat: str, work: Callable[..., T], *args: Any) -> T:
    """`work(*args)` in the tools' pool, waiting while `chat` already has PER_CHAT pieces of work in it."""
    loop = asyncio.get_running_loop()
    slots = _slots.setdefault(loop, {}).setdefault(chat, asyncio.Semaphore(PER_CHAT))
    await slots.acquire()
    try:
        job = _tool_pool().submit(work, *args)
    except BaseException:
        slots.release()
        raise
    job.add_done_callback(lambda _: _release_soon(loop, slots))  # when the work ends, not when the caller stops waiting
    return await asyncio.wrap_future(job, loop=loop)


def _release_soon(loop: asyncio.AbstractEventLoop, slots: asyncio.Semaphore) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is left to wait for the slot
        loop.call_soon_threadsafe(slots.release)


def _tool_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="bicameral-tool")
    return _pool
