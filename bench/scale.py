"""1, 2 and 4 `bicameral run` workers on one PostgreSQL database against many chats at once and a 1 s model.

One worker polls Telegram; every worker answers the chats it leases, so the turns spread over the workers. The
chaos run is in bench/chaos.py.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

from bench.harness import OWNER, TimedTelegram, tag, tag_of
from bench.load import FIRST_CHAT
from bench.report import Figure
from bench.workers import Pool, pool, postgres, wait_for
from bicameral.config import Settings
from tests.support.postgres import PostgresServer

WORKER_COUNTS = (1, 2, 4)
TAKEN = re.compile(r"chat (\S+) taken by this worker")
READY_SECONDS = 120.0


@dataclass
class ScaleRun:
    """One burst against `workers` workers; times in seconds after the first message was sent."""

    workers: int
    chats: int
    answered: int
    makespan: float
    cpu_seconds: float  # user + system, summed over every worker process, first send → last reply
    standing_by: int
    answered_by: list[int] = field(default_factory=list)  # chats each worker took, in start order


@dataclass
class ScaleResult:
    latency: float
    cap: int
    runs: list[ScaleRun] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        name = "scale"
        rows: list[Figure] = []
        base = self.runs[0].makespan if self.runs and self.runs[0].workers == 1 else None
        for run in self.runs:
            label = f"{run.workers} worker{'s' if run.workers > 1 else ''}"
            waves = -(-run.chats // self.cap)
            note = (f"{run.answered}/{run.chats} chats answered, one message each sent at once, {self.latency:g} s model; "
                    f"one worker polls, all {run.workers} answer the chats they lease; turn cap {self.cap} a worker")
            if run.workers == 1:
                note += f": {waves} wave(s)"
            if run.workers > 1:
                note += "; chats taken per worker: " + ", ".join(map(str, run.answered_by))
            rows.append(Figure(name, f"makespan, {label}", run.makespan, "s", note))
            rows.append(Figure(name, f"CPU per message, {label}", run.cpu_seconds / max(run.answered, 1) * 1000, "ms",
                               f"user + system of all {run.workers} worker process(es), {run.cpu_seconds:.2f} s in all"))
            if base and run.workers > 1:
                rows.append(Figure(name, f"makespan vs 1 worker, {label}", run.makespan / base, "x"))
        return rows


def start_workers(made: Pool, count: int, mode: str | None) -> None:
    """Start `count` workers and wait until one serves (it polls) and the others say they stand by."""
    since = time.monotonic()
    for _ in range(count):
        made.add(mode).start()
    wait_for(lambda: bool(made.polls_after(since)) and made.serving() is not None, "a worker to serve and poll",
             READY_SECONDS, made)
    wait_for(lambda: made.standing_by() == count - 1, f"{count - 1} worker(s) to stand by", READY_SECONDS, made)


def warm_up(telegram: TimedTelegram, made: Pool) -> None:
    """One owner message and its reply, so one-time set-up is not billed to what follows."""
    expected = telegram.replies + 1
    telegram.user_sends(OWNER, "warm-up")
    wait_for(lambda: telegram.replies >= expected, "the warm-up reply", READY_SECONDS, made)


def replies_by_chat(telegram: TimedTelegram, since: float = 0.0) -> dict[int, list[tuple[str, float]]]:
    """Each tagged chat's answered sendMessage calls, (text, ts), in arrival order."""
    found: dict[int, list[tuple[str, float]]] = {}
    for call in telegram.calls_to("sendMessage"):
        text = str(call.params.get("text", ""))
        if call.status == 200 and call.ts >= since and tag_of(text) is not None:
            found.setdefault(int(call.params.get("chat_id", 0)), []).append((text, call.ts))
    return found


def model_asks(made: Pool) -> Counter[int]:
    """How many times the model was asked about each tagged message."""
    return Counter(t for r in made.models.requests if (t := tag_of(r.last_user_text())) is not None)


def _one(server: PostgresServer, workers: int, chats: int, latency: float, mode: str | None) -> ScaleRun:
    with pool(server, latency, f"bench-scale-{workers}-") as made:
        telegram = made.telegram
        start_workers(made, workers, mode)
        warm_up(telegram, made)
        expected = telegram.replies + chats
        cpu_before = made.cpu_seconds()
        started = time.monotonic()
        for i in range(chats):
            telegram.user_sends(FIRST_CHAT + i, f"hello {tag(i)}")
        wait_for(lambda: telegram.replies >= expected, f"{chats} replies", 120 + chats * latency, made)
        cpu = made.cpu_seconds() - cpu_before
        standing_by = made.standing_by()
        answered = replies_by_chat(telegram, started)
        last = max((ts for sent in answered.values() for _, ts in sent), default=started)
        takers = [len(set(TAKEN.findall(w.output()))) for w in made.workers]
        return ScaleRun(workers, chats, len(answered), last - started, cpu, standing_by, takers)


def run_scale(chats: int = 1000, latency: float = 1.0, mode: str | None = None,
              counts: tuple[int, ...] = WORKER_COUNTS) -> ScaleResult:
    """A burst of `chats` chats against each worker count, each on a fresh database and data dir (blocking)."""
    result = ScaleResult(latency, int(Settings.model_fields["max_concurrent_turns"].default))
    with postgres() as server:
        for count in counts:
            result.runs.append(_one(server, count, chats, latency, mode))
    return result
