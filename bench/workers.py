"""Several `bicameral run` workers on one PostgreSQL database and one shared data dir, wired to the fakes."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.harness import TimedTelegram, fakes, open_access, tagged_responder
from bench.proc import bot_env
from bicameral.store.leadership import APPLICATION_NAME
from tests.fakes.model_server import ModelServer
from tests.support.postgres import PostgresServer

STANDING_BY = "standing by: another worker serves this database"
# The worker whose lock connection holds the granted advisory lock: its client port names the process.
_SERVING_PORT = """
SELECT a.client_port FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = %s
"""


# A killed worker's chats wait this long for another worker (the setting's default is 30 s).
CHAT_LEASE_SECONDS = 5

@dataclass
class Worker:
    """One `bicameral run` child; its console output goes to a file of its own."""

    name: str
    env: dict[str, str]
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def output_path(self) -> Path:
        return self.cwd / f"{self.name}-output.log"

    def start(self) -> Worker:
        self.starts += 1
        with open(self.output_path, "ab") as output:
            output.write(f"--- start {self.starts}\n".encode())
            output.flush()
            # cwd is the scratch dir so a developer's .env or bicameral.toml cannot leak into the figures.
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bicameral", "run"], cwd=self.cwd, env=self.env,
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def current_output(self) -> str:
        """What this worker's latest start printed."""
        return self.output().rsplit(f"--- start {self.starts}\n", 1)[-1]

    def cpu_seconds(self) -> float:
        """User + system CPU of the process so far (0 once it is gone)."""
        if not self.alive():
            return 0.0
        assert self.proc is not None
        try:
            times = psutil.Process(self.proc.pid).cpu_times()
        except psutil.Error:
            return 0.0
        return float(times.user + times.system + times.children_user + times.children_system)

    def ports(self) -> set[int]:
        """Local TCP ports of the process's connections."""
        if not self.alive():
            return set()
        assert self.proc is not None
        try:
            return {c.laddr.port for c in psutil.Process(self.proc.pid).net_connections(kind="tcp") if c.laddr}
        except psutil.Error:
            return set()

    def ports_to(self, port: int) -> frozenset[int]:
        """The local ports of this worker's open connections to `port` (a fake it talks to): the fake names the sender
        of each call by its port."""
        if not self.alive():
            return frozenset()
        assert self.proc is not None
        try:
            connections = psutil.Process(self.proc.pid).net_connections(kind="tcp")
        except psutil.Error:
            return frozenset()
        return frozenset(c.laddr.port for c in connections if c.raddr and c.raddr.port == port)

    def kill(self) -> None:
        """kill -9, as a crash would, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL if it lingers."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Pool:
    """The workers of one run, the fakes they talk to and the database they share."""

    telegram: TimedTelegram
    models: ModelServer
    url: str
    root: Path
    workers: list[Worker] = field(default_factory=list)

    def add(self, mode: str | None = None) -> Worker:
        """A new (not yet started) worker on the shared database and data dir."""
        env = bot_env(self.telegram, self.models, self.root / "data", mode, database_url=self.url,
                      chat_lease_seconds=CHAT_LEASE_SECONDS)
        worker = Worker(f"worker-{len(self.workers) + 1}", env, self.root)
        self.workers.append(worker)
        return worker

    def serving(self) -> Worker | None:
        """The worker holding the serving lock now, if any."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            ports = {int(row[0]) for row in conn.execute(_SERVING_PORT, (APPLICATION_NAME,)).fetchall() if row[0]}
        return next((w for w in self.workers if w.alive() and w.ports() & ports), None)

    def standing_by(self) -> int:
        """Workers alive whose latest start said they stand by (and do not serve)."""
        server = self.serving()
        return sum(1 for w in self.workers if w.alive() and w is not server and STANDING_BY in w.current_output())

    def polls_after(self, since: float) -> list[float]:
        """Times of getUpdates calls the fake received after `since`."""
        return sorted(c.ts for c in self.telegram.calls_to("getUpdates") if c.ts > since)

    def cpu_seconds(self) -> float:
        return sum(w.cpu_seconds() for w in self.workers)

    def dead(self) -> list[Worker]:
        """Workers that exited; the output of each says why."""
        return [w for w in self.workers if w.proc is not None and not w.alive()]


@contextlib.contextmanager
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the bench's own (Debian's package, a temp dir, a free port); removed on exit."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def pool(server: PostgresServer, latency: float, prefix: str) -> Iterator[Pool]:
    """Fresh fakes, a fresh database and a fresh shared data dir; every worker stopped on exit."""
    name = server.fresh_name()
    url = server.create_database(name)
    try:
        with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            models.responder(tagged_responder(latency))
            made = Pool(telegram, models, url, Path(tmp))
            open_access(made.root / "data")
            try:
                yield made
            finally:
                for worker in made.workers:
                    worker.stop()
    finally:
        server.drop_database(name)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float, pool_: Pool | None = None) -> None:
    """Block until `predicate()` is true; TimeoutError naming `what` (and any worker that died) otherwise."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            dead = ", ".join(f"{w.name} exited {w.proc.returncode if w.proc else '?'}" for w in (pool_.dead() if pool_ else []))
            raise TimeoutError(f"{what}: not within {timeout:.0f} s" + (f" ({dead})" if dead else ""))
        time.sleep(0.02)
