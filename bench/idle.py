"""What an idle bot costs: CPU seconds of `bicameral run` against a Bot API that answers getUpdates at once."""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.harness import OWNER, TimedTelegram, fakes, open_access, wait_until
from bench.proc import spawn_bot, stop_bot, wait_ready
from bench.report import Figure

SETTLE_SECONDS = 2.0  # past start-up work, which is the startup scenario's business
PROBES = 5  # messages sent after the idle stretch, each at a different point of the poll cycle
PROBE_SPACING = 0.37  # seconds between probes: not a divisor of the 1 s cycle, so the phases differ


@dataclass
class IdleResult:
    """CPU used while nobody writes, the polls it made, and how soon a message was then seen."""

    seconds: float
    cpu_seconds: float
    polls: int
    seen_after: list[float]

    def figures(self) -> list[Figure]:
        name = "idle"
        return [
            Figure(name, f"subprocess CPU, idle {self.seconds:g} s", self.cpu_seconds, "s",
                   "user + system of `python -m bicameral run`; the fake answers getUpdates at once with []"),
            Figure(name, "getUpdates while idle", self.polls / self.seconds, "/s", f"{self.polls} in {self.seconds:g} s"),
            Figure(name, "message seen after, while idle, worst", max(self.seen_after) * 1000, "ms",
                   f"user sends → the poll that hands it over answers; {len(self.seen_after)} probes: "
                   + ", ".join(f"{s * 1000:.0f}" for s in self.seen_after) + " ms"),
        ]


async def run_idle(seconds: float = 60.0, mode: str | None = None) -> IdleResult:
    """Start the assistant, let it idle `seconds` against an answer-at-once Bot API, then send one message."""
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        telegram.answer_polls_at_once()
        data_dir = Path(tmp) / "data"
        open_access(data_dir)
        spawned = time.monotonic()
        proc = spawn_bot(telegram, models, data_dir, mode)
        try:
            await wait_ready(telegram, proc, spawned)
            await asyncio.sleep(SETTLE_SECONDS)
            process = psutil.Process(proc.pid)
            before, started = process.cpu_times(), time.monotonic()
            await asyncio.sleep(seconds)
            after = process.cpu_times()
            polls = sum(1 for c in telegram.calls_to("getUpdates") if c.ts >= started)
            cpu = (after.user + after.system) - (before.user + before.system)

            seen_after = [await _probe(telegram, i) for i in range(PROBES)]
        finally:
            stop_bot(proc)
    return IdleResult(seconds, cpu, polls, seen_after)


async def _probe(telegram: TimedTelegram, index: int) -> float:
    """Seconds from a user's message to the getUpdates answer that hands it to the idle bot."""
    await asyncio.sleep(PROBE_SPACING)
    sent = time.monotonic()
    message = telegram.user_sends(OWNER, f"are you there? ({index})")
    key = (OWNER, int(message["message_id"]))
    await wait_until(lambda: key in telegram.handed_out, 30, interval=0.005)
    return telegram.handed_out[key] - sent
