"""Several `bicameral run` workers on one PostgreSQL database: one serves, the others stand by and take over.

Real processes, a real PostgreSQL, the fake Telegram and the fake model. Each worker reaches the fake Telegram
through a relay of its own, so the test sees which worker polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from bicameral.store import Stores
from tests.conftest import OWNER
from tests.e2e.test_process import BotProcess, bot_env, procs, run_cli, sent_texts
from tests.fakes.model_server import Reply
from tests.support.chat import eventually_blocking, quiet_for_blocking

pytestmark = pytest.mark.slow
__all__ = ["procs"]  # the fixture, shared with test_process

STANDING_BY = "standing by: another worker serves this database"
LOST = "lost the database lock: another worker may serve now"


class Relay:
    """A TCP relay to the fake Telegram that counts the getUpdates requests passing through it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.polls = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Relay:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        ).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # ended here, not destroyed pending at exit

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            await asyncio.gather(self._copy(reader, up_writer, count=True), self._copy(up_reader, writer))
        writer.close()

    async def _copy(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, count: bool = False) -> None:
        tail = b""
        try:
            while chunk := await source.read(65536):
                if count:
                    seen = tail + chunk.lower()  # the method name's case varies (PTB asks for "getupdates")
                    self.polls += seen.count(b"/getupdates") - tail.count(b"/getupdates")
                    tail = seen[-16:]
                sink.write(chunk)
                await sink.drain()
        finally:
            sink.close()


@pytest.fixture
def relays() -> Iterator[list[Relay]]:
    made: list[Relay] = []
    yield made
    for relay in made:
        relay.stop()


@pytest.fixture
def workers(tmp_path, telegram, models, postgres_url, procs, relays):
    """Make `bicameral run` workers on the test's database and shared data dir, each through a relay of its own."""
    upstream = int(telegram.url.rsplit(":", 1)[1])

    def make(count: int, **extra: object) -> list[tuple[BotProcess, Relay]]:
        made = []
        for _ in range(count):
            relay = Relay(upstream).start()
            relays.append(relay)
            env = bot_env(tmp_path, telegram, models, BICAMERAL_DATABASE_URL=postgres_url,
                          BICAMERAL_TELEGRAM_API_URL=relay.url, **extra)
            made.append((procs(env, "run"), relay))
        return made

    return make


def serving(pairs: list[tuple[BotProcess, Relay]]) -> tuple[BotProcess, Relay]:
    """Wait until one worker polls; it must be the only one."""
    def polling() -> list[tuple[BotProcess, Relay]]:
        for worker, _ in pairs:
            if worker.proc is not None and worker.proc.poll() is not None:
                raise AssertionError(f"{worker.name} exited with {worker.proc.returncode}:\n{worker.output()}")
        return [pair for pair in pairs if pair[1].polls > 0]

    found = eventually_blocking(polling, "a worker to poll getUpdates", timeout=60)
    assert len(found) == 1, "two workers poll at once"
    return found[0]


def standing_by(worker: BotProcess) -> None:
    eventually_blocking(lambda: STANDING_BY in worker.output(), f"{worker.name} to stand by", timeout=60)


def inbound(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url, connect_timeout=10) as conn:
        rows = conn.execute("SELECT text, status FROM messages WHERE direction = 'in' ORDER BY id").fetchall()
    return [(str(text), str(status)) for text, status in rows]


def test_two_workers_started_at_once_one_polls_and_a_message_is_answered_once(telegram, models, workers, postgres_url):
    models.responder(lambda req: Reply(text="answered by one"))
    pairs = workers(2)
    for worker, _ in pairs:
        worker.start()
    server, relay = serving(pairs)
    standby, standby_relay = next(pair for pair in pairs if pair[0] is not server)
    standing_by(standby)
    assert STANDING_BY not in server.output()

    telegram.user_sends(OWNER, "hello, workers")
    eventually_blocking(lambda: sent_texts(telegram) == ["answered by one"], "the answer", timeout=30)
    eventually_blocking(lambda: inbound(postgres_url) == [("hello, workers", "consumed")], "the message consumed")
    polls = relay.polls
    eventually_blocking(lambda: relay.polls > polls, "the serving worker to poll again", timeout=30)
    assert standby_relay.polls == 0  # the standby never spoke to Telegram
    assert standby.output().count(STANDING_BY) == 1  # one line, not one per try
    assert sent_texts(telegram) == ["answered by one"]


def test_the_serving_worker_killed_mid_turn_the_standby_answers_once(telegram, models, workers, postgres_url):
    models.responder(lambda req: Reply(text="answered once", latency=3.0))
    pairs = workers(2)
    for worker, _ in pairs:
        worker.start()
    server, _ = serving(pairs)
    standby, standby_relay = next(pair for pair in pairs if pair[0] is not server)
    standing_by(standby)

    telegram.user_sends(OWNER, "please answer once")
    models.wait_for_requests(1, timeout=30)
    killed_at = time.monotonic()
    server.kill()  # mid-turn: the model is still "thinking"
    eventually_blocking(lambda: standby_relay.polls > 0, "the standby to take over and poll", timeout=60)
    print(f"failover: the standby polled {time.monotonic() - killed_at:.2f} s after the kill -9")

    eventually_blocking(lambda: sent_texts(telegram) == ["answered once"], "the answer after the takeover", timeout=60)
    eventually_blocking(lambda: inbound(postgres_url) == [("please answer once", "consumed")], "the message consumed")
    eventually_blocking(lambda: all(r.completed_at for r in models.requests), "model requests done", timeout=30)
    quiet_for_blocking(1.0, "every request is done: a duplicate reply, were one coming, would be here by now")
    assert sent_texts(telegram) == ["answered once"]
    assert len(telegram.calls_to("sendMessage")) == 1


def test_a_due_reminder_fires_once_across_workers(tmp_path, telegram, models, workers, postgres_url):
    models.responder(lambda req: Reply(text="still here"))
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    stores = Stores.open(postgres_url, data_dir=tmp_path / "data")
    try:
        now = time.time()
        stores.schedules.create(chat=f"telegram:{OWNER}", creator=f"telegram:{OWNER}", kind="text",
                                body="water the plants", tz="UTC", next_due=now - 5, now=now - 60)
    finally:
        stores.close()
    pairs = workers(2)
    for worker, _ in pairs:
        worker.start()
    server, _ = serving(pairs)
    _, standby_relay = next(pair for pair in pairs if pair[0] is not server)
    reminded = "⏰ Reminder: water the plants"
    eventually_blocking(lambda: reminded in sent_texts(telegram), "the reminder", timeout=30)
    eventually_blocking(lambda: _reminder_done(postgres_url), "the reminder recorded as fired", timeout=30)
    # And recorded as sent: a kill between Telegram taking it and that record sends it again (at least once, by design).
    eventually_blocking(lambda: _outbox_empty(postgres_url), "the reminder recorded as sent", timeout=30)

    server.kill()
    eventually_blocking(lambda: standby_relay.polls > 0, "the standby to take over and poll", timeout=60)
    telegram.user_sends(OWNER, "are you there?")  # answered after the new server's scheduler has started
    eventually_blocking(lambda: "still here" in sent_texts(telegram), "the new server's answer", timeout=60)
    assert sent_texts(telegram).count(reminded) == 1


def _outbox_empty(url: str) -> bool:
    with psycopg.connect(url, connect_timeout=10) as conn:
        row = conn.execute("SELECT COUNT(*) FROM outbox WHERE state = 'pending'").fetchone()
    return row is not None and row[0] == 0


def _reminder_done(url: str) -> bool:
    with psycopg.connect(url, connect_timeout=10) as conn:
        row = conn.execute("SELECT state FROM schedules WHERE body = 'water the plants'").fetchone()
    return row is not None and row[0] == "done"


def test_a_standby_stops_on_sigterm_with_status_0(telegram, models, workers):
    models.responder(lambda req: Reply(text="hi"))
    pairs = workers(2)
    for worker, _ in pairs:
        worker.start()
    server, _ = serving(pairs)
    standby, standby_relay = next(pair for pair in pairs if pair[0] is not server)
    standing_by(standby)
    assert standby.stop(timeout=15) == 0
    assert "Traceback" not in standby.output()
    assert standby_relay.polls == 0
    assert server.proc is not None and server.proc.poll() is None  # the serving one is untouched


def test_the_serving_worker_stopped_with_sigterm_hands_over_to_the_standby(telegram, models, workers):
    models.responder(lambda req: Reply(text="the standby answers"))
    pairs = workers(2)
    for worker, _ in pairs:
        worker.start()
    server, _ = serving(pairs)
    standby, standby_relay = next(pair for pair in pairs if pair[0] is not server)
    standing_by(standby)
    assert server.stop(timeout=30) == 0  # a clean stop lets the lock go only once the app has stopped
    eventually_blocking(lambda: standby_relay.polls > 0, "the standby to take over and poll", timeout=60)
    telegram.user_sends(OWNER, "anyone?")
    eventually_blocking(lambda: sent_texts(telegram) == ["the standby answers"], "the answer", timeout=60)


def test_a_lost_lock_connection_stops_the_server_with_status_1_and_the_standby_serves(
    telegram, models, workers, postgres_url
):
    models.responder(lambda req: Reply(text="answered after the switch"))
    pairs = workers(2)
    for worker, _ in pairs:
        worker.start()
    server, _ = serving(pairs)
    standby, standby_relay = next(pair for pair in pairs if pair[0] is not server)
    standing_by(standby)
    assert server.proc is not None
    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=10) as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
        ).fetchall()
    assert ended == [(True,)]
    assert server.wait_exit(30) == 1
    assert LOST in server.output()
    eventually_blocking(lambda: standby_relay.polls > 0, "the standby to take over and poll", timeout=60)
    telegram.user_sends(OWNER, "who serves now?")
    eventually_blocking(lambda: sent_texts(telegram) == ["answered after the switch"], "the answer", timeout=60)


def test_a_wrong_database_password_exits_2_with_one_line_without_it(tmp_path, telegram, models, postgres_url):
    wrong = postgres_url.replace("@", "x-wrong-secret@", 1) if "@" in postgres_url else postgres_url
    password = psycopg.conninfo.conninfo_to_dict(wrong)["password"]
    assert password and "x-wrong-secret" in str(password)
    env = bot_env(tmp_path, telegram, models, BICAMERAL_DATABASE_URL=wrong)
    done = run_cli(tmp_path, env, "run")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "could not connect to the database" in lines[0] and "BICAMERAL_DATABASE_URL" in lines[0]
    assert "x-wrong-secret" not in done.stderr + done.stdout
    assert str(password) not in done.stderr + done.stdout
    logs = "".join(p.read_text(errors="replace") for p in Path(tmp_path / "data").rglob("*.log*") if p.is_file())
    assert str(password) not in logs
