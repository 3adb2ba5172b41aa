"""Start-up time: spawning `python -m bicameral run` until its first getUpdates, then its first reply."""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import fakes
from bench.load import warm_up
from bench.proc import spawn_bot, stop_bot, wait_ready
from bench.report import Figure


@dataclass
class StartupResult:
    """Seconds per run: spawn → ready, and the first message's round trip once ready."""

    runs: list[float] = field(default_factory=list)
    first_replies: list[float] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        runs = ", ".join(f"{r:.2f}" for r in self.runs)
        firsts = ", ".join(f"{r * 1000:.0f}" for r in self.first_replies)
        return [
            Figure("startup", "spawn → first getUpdates, median", statistics.median(self.runs), "s",
                   f"{len(self.runs)} run(s): {runs} s; the first creates the data dir"),
            Figure("startup", "first message's round trip, median", statistics.median(self.first_replies) * 1000, "ms",
                   f"cold path, 0 s model: update handed out → sendMessage; {firsts} ms"),
        ]


async def run_startup(runs: int = 5, mode: str | None = None) -> StartupResult:
    """Start and stop the assistant `runs` times against one data dir (first run is a fresh install)."""
    result = StartupResult()
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        data_dir = Path(tmp) / "data"
        for _ in range(runs):
            spawned = time.monotonic()
            proc = spawn_bot(telegram, models, data_dir, mode)
            try:
                result.runs.append(await wait_ready(telegram, proc, spawned) - spawned)
                result.first_replies.append(await warm_up(telegram))
            finally:
                stop_bot(proc)
    return result
