"""Where a turn's memory lookup runs: on the event loop while lookups are quick, in a worker thread otherwise."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from bicameral.context.memory import prompt_note
from bicameral.store import Stores
from bicameral.store.memory_scopes import reach_for

CHAT = "telegram:1001"
ADA = reach_for(CHAT, channel="telegram", sender_id="1001", private=True, own_lane=True, owner=True)


@pytest.fixture
def stores(tmp_path: Path):
    opened = Stores.open(tmp_path / "data" / "bicameral.db")
    yield opened
    opened.close()


@pytest.fixture
def lookup_threads(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The thread each memory sync (the first step of every lookup) ran in, in order."""
    seen: list[threading.Thread] = []
    sync = stores.memory.sync

    def recorded() -> None:
        seen.append(threading.current_thread())
        sync()

    monkeypatch.setattr(stores.memory, "sync", recorded)
    return seen


def _timed(stores: Stores, seconds_each: float) -> None:
    """Every lookup from now on takes `seconds_each` by the memory's timer."""
    ticks = iter(range(1_000_000))
    stores.memory.timer = lambda: next(ticks) * seconds_each


def _note(stores: Stores, text: str) -> str | None:
    return asyncio.run(prompt_note(stores, ADA, CHAT, text, budget_tokens=400))


def test_the_first_lookup_runs_beside_the_loop_and_quick_ones_after_it_on_the_loop(
    stores: Stores, lookup_threads: list[threading.Thread]
) -> None:
    stores.memory.remember(ADA.readable[0], "Ada drinks her coffee black")
    lookup_threads.clear()  # remembering synced too
    _timed(stores, 0.0005)
    first = _note(stores, "how do I take my coffee")
    assert stores.memory.last_lookup_seconds == 0.0005
    second = _note(stores, "how do I take my coffee")
    assert lookup_threads[0] is not threading.main_thread()
    assert lookup_threads[1] is threading.main_thread()
    assert first == second and first is not None and "Ada drinks her coffee black" in first


def test_after_a_slow_lookup_the_next_one_goes_beside_the_loop_again(
    stores: Stores, lookup_threads: list[threading.Thread]
) -> None:
    _timed(stores, 0.0005)
    _note(stores, "anything")
    _timed(stores, 0.05)  # as a large memory or a slow disk would take
    _note(stores, "anything")
    _note(stores, "anything")
    assert [t is threading.main_thread() for t in lookup_threads] == [False, True, False]


def test_a_failed_lookup_is_timed_like_any_other(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    _timed(stores, 0.05)

    def broken() -> None:
        raise OSError("disk went away")

    monkeypatch.setattr(stores.memory, "sync", broken)
    assert _note(stores, "anything") is None  # the turn is answered without memory
    assert stores.memory.last_lookup_seconds == 0.05
