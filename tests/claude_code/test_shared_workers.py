"""The Claude Code chamber with several workers: a chat that moves between workers keeps one conversation.

Two real `bicameral run` workers on a real PostgreSQL, the real CLI on the fake model, the fake Telegram. Each worker
takes one chat at a time; a blocker chat whose model call is held keeps one worker full, so the chat under test goes
to the other: its turns run on A, then B, then A again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from pathlib import Path

import psycopg
import pytest

from bench.harness import open_access
from bicameral.claude_code.workspace import workspace
from tests.claude_code.conftest import API_KEY, MODEL, is_main, main_requests, sends
from tests.claude_code.test_e2e import said
from tests.conftest import OWNER
from tests.e2e.test_process import BotProcess, sent_texts
from tests.e2e.test_workers import procs, relays, serving, standing_by, workers  # noqa: F401 (fixtures)
from tests.fakes.model_server import Reply, Request
from tests.support.chat import eventually_blocking

pytestmark = pytest.mark.slow

CHAT = f"telegram:{OWNER}"
WAIT = 120.0  # a turn on the real CLI with two workers and their CLIs on a loaded 2-core machine
RELEASED = "this worker no longer holds the chat"
STOPPED = "its work here stops"
LEASE_SECONDS = 3


def takes(worker: BotProcess, chat: str) -> int:
    return worker.output().count(f"chat {chat} taken by this worker")


def cli_processes(cwd: Path) -> list[int]:
    """The processes (any worker's CLIs) running in a chat's CLI working directory."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == str(cwd):
                    found.append(int(entry))
            except OSError:
                continue  # gone meanwhile, or not ours to read
    return found


def leased(url: str, chat: str) -> bool:
    with psycopg.connect(url, connect_timeout=10) as conn:
        return conn.execute("SELECT 1 FROM chat_leases WHERE chat = %s", (chat,)).fetchone() is not None


class Blockers:
    """Chats of other people whose first model call waits until the test lets it go: each keeps one worker full."""

    def __init__(self, telegram) -> None:
        self._telegram = telegram
        self._gates: dict[str, threading.Event] = {}
        self.asked: set[str] = set()

    async def hold(self, req: Request) -> None:
        text = req.last_user_text()
        for word, gate in list(self._gates.items()):  # the test's thread adds gates meanwhile
            if word in text and not req.tool_results():
                self.asked.add(word)
                await asyncio.to_thread(gate.wait, 300)

    def start(self, user: int, pool: list[BotProcess]) -> BotProcess:
        """User `user` says a blocker word; the worker whose turn now waits on it."""
        word = f"blocker{user}"
        self._gates[word] = threading.Event()
        self._telegram.user_sends(user, word, user_id=user, first_name=f"P{user}")
        eventually_blocking(lambda: word in self.asked, f"{word}'s model call", timeout=WAIT)
        return next(w for w in pool if takes(w, f"telegram:{user}"))

    def finish(self, user: int) -> None:
        self._gates[f"blocker{user}"].set()
        answered = f"you said: blocker{user}"
        eventually_blocking(
            lambda: any(m.get("text") == answered for m in self._telegram.sent_messages(user)),
            f"blocker{user}'s answer", timeout=WAIT,
        )

    def close(self) -> None:
        for gate in self._gates.values():
            gate.set()


@pytest.fixture
def cc_workers(tmp_path, models, workers, claude_bin, cli_home):  # noqa: F811 (the fixture above)
    """Two Claude Code workers with short leases, one chat each at a time, anyone may talk to them; both up."""
    open_access(tmp_path / "data")

    def start() -> list[BotProcess]:
        pairs = workers(
            2, BICAMERAL_MODE="single", BICAMERAL_BACK_MODEL=f"claude-code:{MODEL}", BICAMERAL_CLAUDE_BIN=claude_bin,
            ANTHROPIC_BASE_URL=models.url, ANTHROPIC_API_KEY=API_KEY, BICAMERAL_CHAT_LEASE_SECONDS=LEASE_SECONDS,
            BICAMERAL_MAX_CONCURRENT_TURNS=1, BICAMERAL_LIVENESS_TIMEOUT_SECONDS=600, BICAMERAL_CRASH_BACKOFF_BASE=0.2,
            BICAMERAL_CRASH_BACKOFF_CAP=1, BICAMERAL_PROGRESS_NOTE_AFTER_SECONDS=3600,
        )
        for worker, _ in pairs:
            worker.start()
        server, _ = serving(pairs)
        standing_by(next(worker for worker, _ in pairs if worker is not server))
        return [worker for worker, _ in pairs]

    return start


@pytest.mark.timeout(600)  # three turns and three blockers on the real CLI: about a minute on a quiet machine
def test_a_chat_back_on_a_worker_resumes_the_turns_another_worker_ran(
    tmp_path, telegram, models, cc_workers, postgres_url
):
    blockers = Blockers(telegram)
    answer = sends(lambda req: f"you said: {said(req)}")

    async def respond(req: Request) -> Reply | str:
        if is_main(req):
            await blockers.hold(req)
        return answer(req)

    models.responder(respond)
    pool = cc_workers()
    chat_dir = workspace(tmp_path / "data", CHAT).cwd

    def turn(text: str, count: int) -> None:
        """The owner says `text` and is answered; the chat is then let go and its CLI stopped, on every worker."""
        telegram.user_sends(OWNER, text)
        eventually_blocking(lambda: len(sent_texts(telegram)) == count, f"the answer to {text!r}", timeout=WAIT)
        assert sent_texts(telegram)[-1] == f"you said: {text}"
        eventually_blocking(lambda: not leased(postgres_url, CHAT), "the chat let go", timeout=WAIT)
        eventually_blocking(lambda: not cli_processes(chat_dir), "no CLI left running for the chat", timeout=WAIT)

    try:
        b = blockers.start(7001, pool)
        a = next(w for w in pool if w is not b)
        turn("turn one: the word is ostrich", 1)  # on A: B is full
        assert (takes(a, CHAT), takes(b, CHAT)) == (1, 0)
        assert RELEASED in a.output()

        assert blockers.start(7002, pool) is a  # A full now
        blockers.finish(7001)
        turn("turn two: the colour is teal", 2)  # on B
        assert (takes(a, CHAT), takes(b, CHAT)) == (1, 1)

        assert blockers.start(7003, pool) is b  # B full again
        blockers.finish(7002)
        turn("turn three: what did I tell you?", 3)  # back on A
        assert (takes(a, CHAT), takes(b, CHAT)) == (2, 1)
    finally:
        blockers.close()

    last = next(r for r in reversed(main_requests(models)) if "turn three" in r.last_user_text())
    conversation = json.dumps(last.messages)
    # A's third turn resumed the session B stored: it knows B's exchange, not only its own first turn.
    assert "the word is ostrich" in conversation
    assert "the colour is teal" in conversation and "you said: turn two: the colour is teal" in conversation


@pytest.mark.timeout(600)
def test_a_worker_paused_past_its_lease_stops_the_chats_cli_when_it_finds_the_chat_taken(
    tmp_path, telegram, models, cc_workers
):
    answer = sends(lambda req: f"you said: {said(req)}")
    first = threading.Event()
    done = threading.Event()

    async def respond(req: Request) -> Reply | str:
        if is_main(req) and not first.is_set():
            first.set()
            await asyncio.to_thread(done.wait, 300)  # the paused worker's CLI waits here until the test ends
        return answer(req)

    models.responder(respond)
    pool = cc_workers()
    chat_dir = workspace(tmp_path / "data", CHAT).cwd
    try:
        telegram.user_sends(OWNER, "who answers?")
        eventually_blocking(first.is_set, "the first worker's model call", timeout=WAIT)
        taker = next(w for w in pool if takes(w, CHAT))
        assert taker.proc is not None and cli_processes(chat_dir)
        os.kill(taker.proc.pid, signal.SIGSTOP)
        try:
            eventually_blocking(lambda: sent_texts(telegram) == ["you said: who answers?"], "the other worker's answer",
                                timeout=WAIT)
        finally:
            os.kill(taker.proc.pid, signal.SIGCONT)
        eventually_blocking(lambda: STOPPED in taker.output(), "the paused worker to find its lease lost", timeout=WAIT)
        # Its CLI, still inside the first turn, is stopped with the chat's work; the other worker's went when it let go.
        eventually_blocking(lambda: not cli_processes(chat_dir), "no CLI left running for the chat", timeout=WAIT)
        assert RELEASED in taker.output()
    finally:
        done.set()
    assert sent_texts(telegram) == ["you said: who answers?"]
