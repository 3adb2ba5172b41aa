"""The benchmark's scenarios run end to end with tiny counts; figures are numbers, never judged."""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys

import pytest

from bench.concurrency import AGAIN, run_concurrency
from bench.harness import collector_paused
from bench.idle import run_idle
from bench.overhead import run_overhead
from bench.proc import separable, separate_cores
from bench.startup import run_startup


async def test_overhead_answers_every_message_and_reports_numbers():
    result = await run_overhead(messages=5)
    assert result.answered == 5
    assert len(result.inbound_to_model) == 5
    # In process, a loaded machine may let the fake model server note a completion after the reply went out:
    # such a turn has no gap to time (see bench/overhead.py), so fewer than five may be timed.
    assert 1 <= len(result.reply_to_send) <= 5
    figures = result.figures()
    assert figures and all(isinstance(f.value, (int, float)) and math.isfinite(f.value) for f in figures)


@pytest.mark.slow
async def test_startup_reports_a_number():
    result = await run_startup(runs=1)
    assert len(result.runs) == 1
    assert all(math.isfinite(f.value) and f.value > 0 for f in result.figures())


@pytest.mark.slow
async def test_concurrency_answers_every_chat_in_each_burst_of_a_child_process():
    result = await run_concurrency(chats=4, latency=0.2)
    assert len(result.capped) == 1 + AGAIN and result.uncapped is None  # 4 chats stay under the shipped cap
    assert [b.answered for b in result.capped] == [4] * (1 + AGAIN)
    names = [f.name for f in result.figures()]
    cap = result.default_cap
    assert f"makespan, turn cap {cap} (default)" in names and f"makespan, turn cap {cap}, again" in names
    assert all(math.isfinite(f.value) and f.value > 0 for f in result.figures())


def test_bursts_against_a_child_pause_only_this_process_collector_and_restore_it():
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("a burst that failed")
    assert gc.isenabled()


@pytest.mark.skipif(not separable(), reason="needs two cores and sched_setaffinity")
def test_a_child_gets_a_core_of_its_own_and_this_process_the_others_until_the_block_ends():
    ours = os.sched_getaffinity(0)
    sleeper = "import threading, time; threading.Thread(target=time.sleep, args=(30,)).start()"
    child = subprocess.Popen([sys.executable, "-c", sleeper])
    try:
        with separate_cores(child) as separated:
            assert separated
            threads = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
            assert {frozenset(os.sched_getaffinity(t)) for t in threads} == {frozenset({min(ours)})}
            assert os.sched_getaffinity(0) == ours - {min(ours)}
        assert os.sched_getaffinity(0) == ours
    finally:
        child.kill()
        child.wait()


def test_json_output_holds_every_figure(capsys):
    from bench.__main__ import main

    assert main(["--quick", "--only", "overhead", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["scenarios"] == ["overhead"] and document["failed"] == []
    names = {f["name"] for f in document["figures"]}
    assert {"inbound → model request p50", "model reply → sendMessage p99"} <= names
    assert all(f["scenario"] == "overhead" and math.isfinite(f["value"]) for f in document["figures"])


@pytest.mark.local_model
@pytest.mark.timeout(300)  # it loads the GGUF in a fresh process; slow on a loaded machine
async def test_local_chat_reports_its_first_token():
    pytest.importorskip("llama_cpp")
    from bench.local import run_local

    result = await run_local()
    assert result.available and result.reply
    assert 0 < result.first_token <= result.full_reply
    assert all(math.isfinite(f.value) for f in result.figures())


@pytest.mark.slow
async def test_idle_reports_cpu_polls_and_how_soon_a_message_is_seen():
    result = await run_idle(seconds=2)
    assert len(result.seen_after) == 5
    assert all(math.isfinite(f.value) and f.value >= 0 for f in result.figures())


@pytest.mark.slow
async def test_tools_reports_the_sandbox_the_concurrent_chats_and_web_fetch():
    from bench.tools import run_tools

    result = await run_tools(runs=2, chats=3, fetches=2)
    assert len(result.fetch) == 2
    if result.sandbox_why_off is None:
        assert len(result.sandbox_true) == 2 and result.chats == 3 and result.all_ok
    assert all(math.isfinite(f.value) for f in result.figures())


async def test_the_cap_check_reports_its_cost_per_model_call():
    from bench.overhead import cap_check_figures

    per_call, alone = await cap_check_figures(calls=200, rounds=1)
    assert per_call.name == "cap check per model call" and per_call.unit == "µs" and "without" in per_call.note
    assert alone.value > 0
