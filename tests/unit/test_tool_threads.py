"""One chat's blocking tool work can take neither the threads every turn needs nor every tool thread."""

from __future__ import annotations

import asyncio
import threading

from bicameral import threads
from bicameral.threads import PER_CHAT, in_tool_thread
from tests.support.chat import eventually


def _blocked(started: list[str], release: threading.Event, name: str) -> str:
    started.append(name)
    release.wait(30)
    return name


async def test_a_chat_flooding_the_tool_threads_leaves_turns_and_other_chats_their_threads():
    release = threading.Event()
    started: list[str] = []
    flood = [asyncio.create_task(in_tool_thread("telegram:1", _blocked, started, release, f"a{i}")) for i in range(10)]
    try:
        # The default pool (what turns use for slow memory lookups) answers at once.
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "turn"), 5) == "turn"
        other = asyncio.create_task(in_tool_thread("telegram:2", _blocked, started, release, "b"))
        await eventually(lambda: "b" in started)
        assert sum(name.startswith("a") for name in started) == PER_CHAT, "one chat holds at most its share"
    finally:
        release.set()
    assert sorted(await asyncio.gather(*flood)) == sorted(f"a{i}" for i in range(10))
    assert await other == "b"


async def test_a_call_given_up_on_keeps_its_slot_until_the_work_really_ends():
    release = threading.Event()
    started: list[str] = []
    waiting = [asyncio.create_task(in_tool_thread("telegram:3", _blocked, started, release, f"w{i}")) for i in range(PER_CHAT)]
    await eventually(lambda: len(started) == PER_CHAT)
    for task in waiting:
        task.cancel()  # a tool timeout: the caller stops waiting, the thread does not stop
    await asyncio.gather(*waiting, return_exceptions=True)
    slots = threads._slots[asyncio.get_running_loop()]["telegram:3"]
    assert slots.locked(), "both slots stay taken while their threads still run"
    late = asyncio.create_task(in_tool_thread("telegram:3", _blocked, started, release, "late"))
    release.set()
    assert await late == "late"
    assert threads.POOL_THREADS > PER_CHAT
