"""What outlives a CLI process: the backoff, the crash window, the stored session id, the supervisor's decisions."""

from __future__ import annotations

import asyncio

from bicameral.backoff import Backoff, backoff_delay
from bicameral.claude_code.failures import Failure, Recovery
from bicameral.claude_code.supervision import CrashBudget, SessionIds, Supervisor
from bicameral.store import Stores

CRASH = Failure("crash", "My executor process crashed while working on this.", Recovery.KEEP_SESSION)


def test_backoff_doubles_from_the_base_up_to_the_cap():
    assert [backoff_delay(2, 64, n) for n in range(1, 10)] == [2, 4, 8, 16, 32, 64, 64, 64, 64]
    assert backoff_delay(0.5, 3, 1) == 0.5 and backoff_delay(0.5, 3, 5) == 3


def test_a_running_backoff_starts_over_after_a_success():
    backoff = Backoff(1, 30)
    assert [backoff.next() for _ in range(6)] == [1, 2, 4, 8, 16, 30]
    backoff.reset()
    assert backoff.next() == 1


def test_only_crashes_inside_the_window_count():
    now = [0.0]
    budget = CrashBudget(limit=3, window_seconds=600, clock=lambda: now[0])
    assert budget.record() and budget.record()
    now[0] = 601.0  # the first two fell out of the window
    assert budget.record() and budget.recent == 1
    now[0] = 700.0
    assert budget.record()
    now[0] = 800.0
    assert not budget.record()  # three within 600 s: spent
    assert budget.recent == 3


def test_a_session_is_confirmed_only_once_it_completed_a_turn(tmp_path):
    stores = Stores.open(tmp_path / "db.sqlite")
    ids = SessionIds(stores.kv, "claude_code.session:telegram:1")
    assert ids.get() is None and not ids.confirmed()
    ids.set("s1")
    assert ids.get() == "s1" and not ids.confirmed()
    ids.confirm("s1")
    assert ids.confirmed()
    ids.set("s2")  # a new session replaces it: not confirmed until its own turn completes
    assert not ids.confirmed()
    ids.clear()
    assert ids.get() is None and not ids.confirmed()
    stores.close()


class FakeTime:
    """A clock that a sleep moves forward, so the supervisor's waits take no real time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self._alarms: list[tuple[float, asyncio.Event]] = []

    def at(self, moment: float) -> asyncio.Event:
        """An event set once the fake time reaches `moment`."""
        alarm = asyncio.Event()
        self._alarms.append((moment, alarm))
        return alarm

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        for moment, alarm in self._alarms:
            if self.now >= moment:
                alarm.set()
        await asyncio.sleep(0)


def supervisor(time: FakeTime, gave_up: list[str], *, limit: int = 10) -> Supervisor:
    async def on_giveup(failure: Failure) -> None:
        gave_up.append(failure.kind)

    return Supervisor(
        "test",
        CrashBudget(limit, 600, clock=time.clock),
        backoff_base=2,
        backoff_cap=8,
        liveness_timeout=10,
        liveness_poll=1,
        on_giveup=on_giveup,
        clock=time.clock,
        sleep=time.sleep,
    )


async def test_crashes_are_respawned_after_growing_delays_until_the_budget_is_spent():
    time, gave_up, respawns = FakeTime(), [], []

    async def respawn() -> None:
        respawns.append(time.now)

    sup = supervisor(time, gave_up, limit=5)
    for _ in range(3):
        sup.crashed(CRASH, respawn)
        assert await sup.wait_for_respawn()
    assert time.slept == [2, 4, 8] and len(respawns) == 3
    sup.recovered()  # a completed turn: the next crash starts from the base again
    sup.crashed(CRASH, respawn)
    assert await sup.wait_for_respawn() and time.slept[-1] == 2
    sup.crashed(CRASH, respawn)  # the fifth in the window
    assert not await sup.wait_for_respawn() and sup.gave_up and sup.failure == CRASH
    await asyncio.sleep(0)
    assert gave_up == ["crash"] and len(respawns) == 4


async def test_a_failure_that_cannot_heal_gives_up_at_once():
    time, gave_up = FakeTime(), []
    sup = supervisor(time, gave_up)
    missing = Failure("cli_missing", "not installed", Recovery.GIVE_UP)

    async def respawn() -> None:
        raise AssertionError("must not respawn")

    sup.crashed(missing, respawn)
    await asyncio.sleep(0)
    assert sup.gave_up and gave_up == ["cli_missing"] and not await sup.wait_for_respawn()


async def test_a_silent_turn_is_stalled_but_a_running_tool_is_not_silence():
    time, stalls = FakeTime(), []
    sup = supervisor(time, [])
    stalled = asyncio.Event()

    async def stall(silent: float) -> None:
        stalls.append(silent)
        stalled.set()

    sup.tool_activity(True)  # a tool call in progress for 60 s of fake time
    minute = time.at(60)
    sup.watch(watched=lambda: True, stall=stall)
    await asyncio.wait_for(minute.wait(), timeout=10)
    assert stalls == []
    sup.tool_activity(False)  # the tool returned; from here on the silence counts
    await asyncio.wait_for(stalled.wait(), timeout=10)
    sup.stop()
    assert stalls[0] == 11  # the first poll past the 10 s timeout, counted from the tool's end
