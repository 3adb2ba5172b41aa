"""Makespan of many chats messaging at once against a 1 s model, with `bicameral run` in its own process."""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import fakes, open_access, tagged_responder
from bench.load import Burst, burst, warm_up
from bench.proc import separable, separate_cores, spawn_bot, stop_bot, wait_ready
from bench.report import Figure
from bicameral.config import Settings

AGAIN = 2  # bursts after the first, on the connections it opened


@dataclass
class ConcurrencyResult:
    """Bursts at the shipped turn cap and, when a burst exceeds it, one with the cap lifted."""

    latency: float
    default_cap: int
    capped: list[Burst]  # the first burst after start, then AGAIN more
    uncapped: Burst | None = None
    own_core: bool = False  # the assistant had a core of its own, the fakes the others

    def figures(self) -> list[Figure]:
        name = "concurrency"
        ideal = f"one {self.latency:g} s model call per chat, all in parallel"
        first, *again = self.capped
        where = "the assistant on a core of its own, the fakes on the others" if self.own_core else "one core for all"
        rows = [Figure(name, "ideal makespan", self.latency, "s", f"{ideal}; {where}")]
        runs = [(f"turn cap {self.default_cap} (default)", first, self.default_cap)]
        if self.uncapped is not None:
            runs.append((f"turn cap {self.uncapped.chats}", self.uncapped, self.uncapped.chats))
        for label, run, cap in runs:
            waves = -(-run.chats // cap)
            note = f"first burst after start; {run.answered}/{run.chats} answered, {waves} wave(s) of turns; {run.phases()}"
            rows.append(Figure(name, f"makespan, {label}", run.makespan, "s", note))
            rows.append(Figure(name, f"ratio to ideal, {label}", run.makespan / self.latency, "x"))
        if again:
            seen = ", ".join(f"{b.makespan:.2f}" for b in again)
            note = f"median of {len(again)} more bursts ({seen} s), on the model connections kept alive"
            middle = statistics.median(b.makespan for b in again)
            rows.append(Figure(name, f"makespan, turn cap {self.default_cap}, again", middle, "s", note))
        return rows


async def run_concurrency(chats: int = 200, latency: float = 1.0, mode: str | None = None) -> ConcurrencyResult:
    """Bursts with the shipped settings; another with the turn cap lifted if a burst exceeds it."""
    cap = int(Settings.model_fields["max_concurrent_turns"].default)
    result = ConcurrencyResult(latency, cap, await _bursts(chats, latency, mode, 1 + AGAIN), own_core=separable())
    if chats > cap:
        # Separates queueing behind the cap from the harness's own cost.
        [result.uncapped] = await _bursts(chats, latency, mode, 1, max_concurrent_turns=chats)
    return result


async def _bursts(chats: int, latency: float, mode: str | None, count: int, **settings: object) -> list[Burst]:
    """`count` bursts against one `bicameral run`, the fakes in this process as the internet would be.

    In-process, the fakes would share this interpreter's one core with the assistant, and their own work
    (a streamed answer and a sendMessage per chat) would be billed to the makespan.
    """
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-concurrency-") as tmp:
        models.responder(tagged_responder(latency))
        data_dir = Path(tmp) / "data"
        open_access(data_dir)
        spawned = time.monotonic()
        proc = spawn_bot(telegram, models, data_dir, mode, **settings)
        try:
            await wait_ready(telegram, proc, spawned)
            with separate_cores(proc):
                await warm_up(telegram)
                return [await burst(telegram, models, chats, timeout=60 + chats * latency) for _ in range(count)]
        finally:
            stop_bot(proc)
