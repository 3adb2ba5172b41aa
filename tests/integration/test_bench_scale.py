"""The scale scenario end to end with tiny counts: workers on a real PostgreSQL; figures are printed, never judged."""

from __future__ import annotations

import math

import pytest

from bench.__main__ import OPT_IN, SCENARIOS, main
from bench.chaos import run_chaos
from bench.scale import run_scale

pytestmark = pytest.mark.slow


def test_one_and_two_workers_answer_every_chat_and_report_numbers():
    result = run_scale(chats=4, latency=0.2, counts=(1, 2))
    assert [(r.workers, r.answered, r.standing_by) for r in result.runs] == [(1, 4, 0), (2, 4, 1)]
    names = [f.name for f in result.figures()]
    assert "makespan vs 1 worker, 2 workers" in names and "CPU per message, 2 workers" in names
    assert all(math.isfinite(f.value) and f.value > 0 for f in result.figures())


def test_chaos_kills_a_worker_and_counts_every_chat():
    result = run_chaos(chats=6, latency=0.2, kills=1, waves=2, seed=7)
    [kill] = result.kills
    assert (kill.failover is not None) == kill.serving  # a takeover is measured when the polling worker was the victim
    # Lost and doubled chats are figures to print, not to assert: the run only has to count them.
    assert len(result.lost) <= 6 and set(result.twice_in_window) <= set(result.twice)
    assert {f.name for f in result.figures()} >= {"lost (no reply)", "answered twice", "kills (kill -9 of a random worker)"}


def test_scale_runs_only_when_named(monkeypatch):
    assert "scale" in SCENARIOS and "scale" in OPT_IN
    ran: list[str] = []

    async def record(plan):
        ran.append("ran")
        return []

    monkeypatch.setitem(SCENARIOS, "scale", record)
    assert main(["--only", "scale", "--quick"]) == 0
    assert ran == ["ran"]
