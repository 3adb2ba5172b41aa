"""Resident memory idle and with many chats in flight, in this process and in a real child process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.harness import MIB, TimedTelegram, bench_settings, fakes, open_access, rss, running_app, tagged_responder
from bench.load import Burst, burst, warm_up
from bench.proc import separate_cores, spawn_bot, stop_bot, wait_ready
from bench.report import Figure
from tests.fakes.model_server import ModelServer

SETTLE_SECONDS = 2.0  # past the first long poll, so lazy start-up work is done
SMALL_BURST = 50  # the "RSS growth with 50 active chats"


@dataclass
class MemoryResult:
    """RSS in MiB; in-process figures include the bench and both fakes."""

    chats: int
    inproc_baseline: float
    inproc_idle: float
    inproc_load: Burst
    child_idle: float
    child_load: Burst
    child_small_load: Burst
    child_idle_anthropic: float

    def figures(self) -> list[Figure]:
        name, n = "memory", self.chats
        peak = f"peak of samples every 20 ms while {n} chats' turns are in flight"
        child, inproc = self.child_load, self.inproc_load
        small = self.child_small_load
        return [
            Figure(name, "subprocess RSS, idle", self.child_idle, "MiB",
                   f"`python -m bicameral run`, Telegram + OpenAI-compatible model, {SETTLE_SECONDS:g} s after "
                   "answering its first message"),
            Figure(name, "subprocess RSS, idle, Anthropic model", self.child_idle_anthropic, "MiB",
                   "the same with both chambers on anthropic: (the Messages API instead of Chat Completions)"),
            Figure(name, f"subprocess RSS growth, {small.chats} active chats", (small.peak_rss_mib or 0.0) - self.child_idle,
                   "MiB", f"peak while {small.chats} chats' turns are in flight, minus idle"),
            Figure(name, f"subprocess RSS, {n} active chats", child.peak_rss_mib or 0.0, "MiB", peak),
            Figure(name, f"subprocess makespan, {n} chats", child.makespan, "s",
                   f"fakes in the parent; {child.answered}/{n} answered; {child.phases()}"),
            Figure(name, "in-process RSS before start", self.inproc_baseline, "MiB", "bench + fakes + imports, no app"),
            Figure(name, "in-process RSS, idle", self.inproc_idle, "MiB",
                   f"app started, settled {SETTLE_SECONDS:g} s: +{self.inproc_idle - self.inproc_baseline:.1f} MiB"),
            Figure(name, f"in-process RSS, {n} active chats", inproc.peak_rss_mib or 0.0, "MiB",
                   f"{peak}; {inproc.answered}/{n} answered"),
        ]


async def run_memory(chats: int = 200, latency: float = 1.0, mode: str | None = None) -> MemoryResult:
    """Measure the in-process app first (before other scenarios grow this process), then a child process."""
    baseline, idle, inproc = await _in_process(chats, latency, mode)
    child_idle, small, child = await _subprocess(chats, latency, mode)
    anthropic_idle = await _idle_subprocess(mode, "anthropic")
    return MemoryResult(chats, baseline, idle, inproc, child_idle, child, small, anthropic_idle)


async def _in_process(chats: int, latency: float, mode: str | None) -> tuple[float, float, Burst]:
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        models.responder(tagged_responder(latency))
        settings = bench_settings(Path(tmp), telegram, models, mode)
        open_access(settings.data_dir)
        baseline = rss(os.getpid()) / MIB
        async with running_app(settings):
            await asyncio.sleep(SETTLE_SECONDS)
            idle = rss(os.getpid()) / MIB
            await warm_up(telegram)
            loaded = await burst(telegram, models, chats, timeout=60 + chats * latency, sample_pid=os.getpid(), in_process=True)
        return baseline, idle, loaded


async def _subprocess(chats: int, latency: float, mode: str | None) -> tuple[float, Burst, Burst]:
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-memory-proc-") as tmp:
        models.responder(tagged_responder(latency))
        data_dir = Path(tmp) / "data"
        open_access(data_dir)
        async with _settled_bot(telegram, models, data_dir, mode) as proc:
            idle = rss(proc.pid) / MIB
            with separate_cores(proc):
                small = await burst(telegram, models, SMALL_BURST, timeout=60 + SMALL_BURST * latency, sample_pid=proc.pid)
                loaded = await burst(telegram, models, chats, timeout=60 + chats * latency, sample_pid=proc.pid)
        return idle, small, loaded


async def _idle_subprocess(mode: str | None, provider: str) -> float:
    """RSS of `python -m bicameral run` with both chambers on `provider`, settled after its first answer."""
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-memory-idle-") as tmp:
        models.responder(tagged_responder(0.0))
        async with _settled_bot(telegram, models, Path(tmp) / "data", mode, provider) as proc:
            return rss(proc.pid) / MIB


@asynccontextmanager
async def _settled_bot(
    telegram: TimedTelegram, models: ModelServer, data_dir: Path, mode: str | None, provider: str = "openai"
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """`bicameral run` polling, past one answered message and a settling pause; stopped on exit.

    The answered message first: what loads or is built on first use (the model client, its TLS context) is then counted.
    """
    spawned = time.monotonic()
    proc = spawn_bot(telegram, models, data_dir, mode, provider)
    try:
        await wait_ready(telegram, proc, spawned)
        await warm_up(telegram)
        await asyncio.sleep(SETTLE_SECONDS)
        yield proc
    finally:
        stop_bot(proc)
