"""Scheduler: firing error for 1,000 reminders due in one second across 200 chats; 10,000 stored schedules."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import MIB, bench_settings, fakes, open_access, percentile, rss, running_app, wait_until
from bench.report import Figure
from bicameral.store import Stores

_PREFIX = "⏰ Reminder: bench-"


@dataclass
class SchedulerResult:
    errors: list[float] = field(default_factory=list)  # seconds, due time → sendMessage received
    lags: list[float] = field(default_factory=list)  # seconds, due time → fire recorded
    fired: int = 0
    startup_empty: float = 0.0
    startup_stored: float = 0.0
    rss_empty: int = 0
    rss_stored: int = 0
    stored: int = 0

    def figures(self) -> list[Figure]:
        ms = [e * 1000 for e in self.errors]
        note = f"{self.fired} reminders across 200 chats due in the same second; due → fake Bot API sendMessage"
        return [
            Figure("scheduler", "firing error p50", percentile(ms, 50), "ms", note),
            Figure("scheduler", "firing error p99", percentile(ms, 99), "ms"),
            Figure("scheduler", "firing error max", max(ms), "ms"),
            Figure("scheduler", "due → fire recorded p50/max", percentile([lag * 1000 for lag in self.lags], 50), "ms",
                   f"max {max(self.lags) * 1000:.0f} ms: the scheduler's own part; the rest is sending"),
            Figure("scheduler", f"start-up with {self.stored:,} schedules stored", self.startup_stored, "s",
                   f"App.start in-process; {self.startup_empty:.3f} s with none"),
            Figure("scheduler", f"RSS added by {self.stored:,} stored schedules", (self.rss_stored - self.rss_empty) / MIB,
                   "MiB", "in-process RSS after start, stored vs empty; the scheduler keeps only the next due time in memory"),
        ]


def _store(data_dir: Path, rows: list[tuple[str, float]]) -> None:
    stores = Stores.open(data_dir / "bicameral.db")
    try:
        rows_due = [(chat, f"bench-{i}", due) for i, (chat, due) in enumerate(rows)]
        stores.schedules.create_reminders(rows_due, tz="UTC", now=time.time())
    finally:
        stores.close()


async def run_scheduler(reminders: int = 1000, chats: int = 200, stored: int = 10_000) -> SchedulerResult:
    result = SchedulerResult(stored=stored)
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        # Start-up and memory: empty, then with `stored` schedules spread over the next day.
        for count in (0, stored):
            data_dir = Path(tmp) / f"start-{count}"
            settings = bench_settings(data_dir, telegram, models)
            later = time.time() + 3600
            _store(settings.data_dir, [(f"telegram:{5000 + i % chats}", later + i * 86400 / max(count, 1)) for i in range(count)])
            started = time.monotonic()
            async with running_app(settings):
                took = time.monotonic() - started
                size = rss(os.getpid())
            if count:
                result.startup_stored, result.rss_stored = took, size
            else:
                result.startup_empty, result.rss_empty = took, size

        # Firing error: all due in the same second, a few seconds after start.
        data_dir = Path(tmp) / "fire"
        settings = bench_settings(data_dir, telegram, models)
        open_access(settings.data_dir)
        due = time.time() + 5
        _store(settings.data_dir, [(f"telegram:{9000 + i % chats}", due) for i in range(reminders)])
        clock_offset = time.time() - time.monotonic()
        before = telegram.replies
        async with running_app(settings) as app:
            await wait_until(lambda: telegram.replies - before >= reminders, timeout=300, interval=0.05)
            result.lags = app.stores.schedules.fire_lags()
        for text, ts in telegram.send_calls():
            if text.startswith(_PREFIX):
                result.errors.append(ts + clock_offset - due)
        result.fired = len(result.errors)
    return result
