"""Makespan of many chats messaging at once against a 1 s model."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.harness import bench_settings, fakes, open_access, running_app, tagged_responder
from bench.load import Burst, burst, warm_up
from bench.report import Figure
from bicameral.config import Settings


@dataclass
class ConcurrencyResult:
    """A burst at the shipped turn cap and, when the burst exceeds it, one with the cap lifted."""

    latency: float
    default_cap: int
    capped: Burst
    uncapped: Burst | None = None

    def figures(self) -> list[Figure]:
        name = "concurrency"
        ideal = f"one {self.latency:g} s model call per chat, all in parallel"
        rows = [Figure(name, "ideal makespan", self.latency, "s", ideal)]
        runs = [(f"turn cap {self.default_cap} (default)", self.capped, self.default_cap)]
        if self.uncapped is not None:
            runs.append((f"turn cap {self.uncapped.chats}", self.uncapped, self.uncapped.chats))
        for label, run, cap in runs:
            waves = -(-run.chats // cap)
            note = f"{run.answered}/{run.chats} answered, {waves} wave(s) of turns; {run.phases()}"
            rows.append(Figure(name, f"makespan, {label}", run.makespan, "s", note))
            rows.append(Figure(name, f"ratio to ideal, {label}", run.makespan / self.latency, "x"))
        return rows


async def run_concurrency(chats: int = 200, latency: float = 1.0, mode: str | None = None) -> ConcurrencyResult:
    """One burst with the shipped settings; another with the turn cap lifted if the burst exceeds it."""
    cap = int(Settings.model_fields["max_concurrent_turns"].default)
    result = ConcurrencyResult(latency, cap, await _one_burst(chats, latency, mode))
    if chats > cap:
        # Separates queueing behind the cap from the harness's own cost.
        result.uncapped = await _one_burst(chats, latency, mode, max_concurrent_turns=chats)
    return result


async def _one_burst(chats: int, latency: float, mode: str | None, **overrides: object) -> Burst:
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-concurrency-") as tmp:
        models.responder(tagged_responder(latency))
        settings = bench_settings(Path(tmp), telegram, models, mode, **overrides)
        open_access(settings.data_dir)
        async with running_app(settings):
            await warm_up(telegram)
            return await burst(telegram, models, chats, timeout=60 + chats * latency)
