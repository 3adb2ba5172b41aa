"""Chaos: three workers on one database while chats arrive in waves; a worker is killed at random moments.

The victim is any live worker: the one that polls (another takes over polling) or one that only answers (its chats
wait out their lease, then another worker answers them). Each killed worker is started again at once. At the end every
chat should have exactly one reply: the figures count the chats with none (lost) and with more than one (answered
twice).
"""

from __future__ import annotations

import contextlib
import logging
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench.harness import TimedTelegram, tag, tag_of
from bench.load import FIRST_CHAT
from bench.report import Figure
from bench.scale import model_asks, replies_by_chat, start_workers, warm_up
from bench.workers import Pool, Worker, pool, postgres, wait_for
from tests.fakes.telegram_server import Call

WORKERS = 3
KILLS = 3
WAVES = 10
WAVE_GAP = 1.5  # seconds between waves
KILL_DELAY = (1.0, 5.0)  # a kill comes this long (uniform) after the previous takeover
QUIET = 3.0  # seconds without a new reply (and no model request open) before the replies are counted


@dataclass
class Kill:
    at: float  # monotonic
    worker: str
    serving: bool  # it polled Telegram: another worker takes polling over
    ports: frozenset[int] = frozenset()  # its connections to the fake Telegram when it was killed
    failover: float | None = None  # kill -9 of the serving worker → the next getUpdates the fake received


@dataclass
class ChaosResult:
    chats: int
    seed: int
    waves: int = WAVES
    latency: float = 1.0
    kills: list[Kill] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)  # chat ids with no reply
    twice: list[int] = field(default_factory=list)  # chat ids answered more than once
    # Of those, the chats whose first reply came over a connection of a worker killed right after, and the next one
    # after that kill: the at-least-once window (Telegram took the message, the worker died before recording it as
    # sent, so another worker sent it again). Any other would be a bug.
    twice_in_window: list[int] = field(default_factory=list)
    asked_twice: int = 0  # tagged messages the model was asked about more than once (the turn ran again)
    exited: list[str] = field(default_factory=list)  # workers that stopped on their own, with their status
    makespan: float = 0.0

    def figures(self) -> list[Figure]:
        name = "scale, chaos"
        fails = [k.failover for k in self.kills if k.failover is not None]
        seen = ", ".join(f"{f:.2f}" for f in fails)
        restarts = f"; exited on their own and restarted: {', '.join(self.exited)}" if self.exited else ""
        rows = [
            Figure(name, "chats", self.chats, "",
                   f"{WORKERS} workers, one message per chat in {self.waves} waves {WAVE_GAP:g} s apart, "
                   f"{self.latency:g} s model; seed {self.seed}"),
            Figure(name, "kills (kill -9 of a random worker)", len(self.kills), "",
                   f"{sum(k.serving for k in self.kills)} of the serving one; each {KILL_DELAY[0]:g}-{KILL_DELAY[1]:g} s "
                   f"after the previous one (or its takeover); the killed worker restarted at once{restarts}"),
            Figure(name, "lost (no reply)", len(self.lost), "", _some(self.lost)),
            Figure(name, "answered twice", len(self.twice), "",
                   f"{len(self.twice_in_window)} of them first sent by a worker killed before it recorded the send, "
                   f"then again by another (the at-least-once window: Telegram has no idempotency key); "
                   f"{len(self.twice) - len(self.twice_in_window)} otherwise; the model was asked more than once about "
                   f"{self.asked_twice} message(s)" + _some(self.twice, "; ")),
            Figure(name, "makespan", self.makespan, "s", "first send → last reply"),
        ]
        missed = sum(1 for k in self.kills if k.serving and k.failover is None)
        if fails:
            rows.append(Figure(name, "failover, kill → next getUpdates median", statistics.median(fails), "s",
                               f"each: {seen} s; max {max(fails):.2f} s" + (f"; {missed} with none in 60 s" if missed else "")))
        return rows

    def alarming(self) -> str | None:
        """A line to print prominently when a chat was lost or answered twice."""
        if not self.lost and not self.twice:
            return None
        return (f"CHAOS: {len(self.lost)} chat(s) LOST, {len(self.twice)} ANSWERED TWICE "
                f"({len(self.twice_in_window)} sent by a worker killed before it recorded the send, "
                f"{len(self.twice) - len(self.twice_in_window)} otherwise) over {len(self.kills)} kills")


def _some(chats: list[int], before: str = "") -> str:
    return (before + "chats " + ", ".join(map(str, chats[:10])) + (" …" if len(chats) > 10 else "")) if chats else ""


class Killer(threading.Thread):
    """Kills a random worker `kills` times at random moments, restarting it at once; measures each failover."""

    def __init__(self, made: Pool, kills: int, rng: random.Random) -> None:
        super().__init__(name="chaos-killer", daemon=True)
        self.made = made
        self.kills_wanted = kills
        self.rng = rng
        self.kills: list[Kill] = []
        self.error: BaseException | None = None
        self.telegram_port = urlsplit(made.telegram.url).port or 80

    def run(self) -> None:
        try:
            for _ in range(self.kills_wanted):
                time.sleep(self.rng.uniform(*KILL_DELAY))
                server = self._server()
                victim = self.rng.choice([w for w in self.made.workers if w.alive()])
                ports = victim.ports_to(self.telegram_port)
                kill = Kill(time.monotonic(), victim.name, serving=victim is server, ports=ports)
                victim.kill()
                victim.start()  # a supervisor would restart it; it stands by
                self.kills.append(kill)
                if kill.serving:
                    self._took_over(kill)
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def _took_over(self, kill: Kill) -> None:
        """Wait for the next getUpdates after the kill (the dead worker makes none); note how long it took."""
        try:
            wait_for(lambda: bool(self.made.polls_after(kill.at)), "a takeover after a kill", 60, self.made)
        except TimeoutError:  # reported as a kill without failover, with what each worker said last
            for worker in self.made.workers:
                tail = "\n".join(worker.current_output().splitlines()[-15:])
                print(f"no takeover within 60 s; {worker.name} said last:\n{tail}", file=sys.stderr)
            return
        kill.failover = self.made.polls_after(kill.at)[0] - kill.at

    def _server(self) -> Worker:
        found: list[Worker] = []

        def serving() -> bool:
            worker = self.made.serving()
            found[:] = [worker] if worker is not None else []
            return bool(found)

        wait_for(serving, "a serving worker to kill", 60, self.made)
        return found[0]


def _supervise(made: Pool, exited: list[str]) -> None:
    """Start again any worker that stopped on its own (one that lost its lock exits 1), as a supervisor would."""
    for worker in made.dead():
        assert worker.proc is not None
        exited.append(f"{worker.name} (status {worker.proc.returncode})")
        worker.start()


def run_chaos(chats: int = 1000, latency: float = 1.0, mode: str | None = None, kills: int = KILLS,
              seed: int | None = None, waves: int = WAVES) -> ChaosResult:
    """Waves of chats while workers are killed; then count the chats lost and answered twice (blocking)."""
    seed = random.randrange(1 << 30) if seed is None else seed
    result = ChaosResult(chats, seed, waves, latency)
    with _fakes_quiet(), postgres() as server, pool(server, latency, "bench-chaos-") as made:
        telegram = made.telegram
        start_workers(made, WORKERS, mode)
        warm_up(telegram, made)
        killer = Killer(made, kills, random.Random(seed))
        started = time.monotonic()
        killer.start()
        per_wave = -(-chats // waves)
        for first in range(0, chats, per_wave):
            for i in range(first, min(first + per_wave, chats)):
                telegram.user_sends(FIRST_CHAT + i, f"hello {tag(i)}")
            _supervise(made, result.exited)
            time.sleep(WAVE_GAP)
        killer.join()
        if killer.error is not None:
            raise killer.error
        result.kills = killer.kills

        def all_answered() -> bool:
            _supervise(made, result.exited)
            return len(replies_by_chat(telegram, started)) >= chats

        try:
            wait_for(all_answered, f"all {chats} chats answered", 120 + chats * latency, made)
        except TimeoutError:
            pass  # counted below as lost
        _quiet(made)
        answered = replies_by_chat(telegram, started)
        first_sends = _first_sends(telegram, started)
        result.makespan = max((ts for sent in answered.values() for _, ts in sent), default=started) - started
        result.lost = [FIRST_CHAT + i for i in range(chats) if FIRST_CHAT + i not in answered]
        result.twice = sorted(chat for chat, sent in answered.items() if len(sent) > 1)
        result.twice_in_window = [c for c in result.twice if _in_window(first_sends[c], answered[c], result.kills)]
        result.asked_twice = sum(1 for n in model_asks(made).values() if n > 1)
    return result


@contextlib.contextmanager
def _fakes_quiet() -> Iterator[None]:
    """The fakes' server logs no traceback for each connection a killed worker left half-answered."""
    logger = logging.getLogger("aiohttp.server")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _first_sends(telegram: TimedTelegram, since: float) -> dict[int, Call]:
    """Each tagged chat's first answered sendMessage call."""
    found: dict[int, Call] = {}
    for call in telegram.calls_to("sendMessage"):
        if call.status == 200 and call.ts >= since and tag_of(str(call.params.get("text", ""))) is not None:
            found.setdefault(int(call.params.get("chat_id", 0)), call)
    return found


def _in_window(first: Call, sent: list[tuple[str, float]], kills: list[Kill]) -> bool:
    """The first reply came over a connection of a worker killed after it, and the next reply after that kill."""
    return any(first.client_port in k.ports and first.ts <= k.at <= sent[1][1] for k in kills)


def _quiet(made: Pool) -> None:
    """Wait until no model request is open and no reply has come for QUIET seconds: a late duplicate would be in."""
    telegram = made.telegram
    last = (telegram.replies, time.monotonic())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if telegram.replies != last[0] or any(r.completed_at is None for r in made.models.requests):
            last = (telegram.replies, time.monotonic())
        elif time.monotonic() - last[1] >= QUIET:
            return
