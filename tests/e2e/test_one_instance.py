"""One assistant per SQLite data dir: a second `bicameral run` on it says so in one line, exits 2, touches nothing."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from tests.conftest import OWNER
from tests.e2e.test_process import bot_env, inbound_rows, procs, run_cli, sent_texts
from tests.fakes.model_server import Reply
from tests.support.chat import eventually_blocking

pytestmark = pytest.mark.slow
__all__ = ["procs"]  # the fixture, shared with test_process


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_second_assistant_on_the_same_data_dir_exits_2_and_touches_nothing(tmp_path, telegram, models, procs):
    models.responder(lambda req: Reply(text="still here"))
    env = bot_env(tmp_path, telegram, models)
    first = procs(env, "run", telegram=telegram).start()
    first.wait_ready()
    db = tmp_path / "data" / "bicameral.db"
    before = {p.name: digest(p) for p in db.parent.glob("bicameral.db*")}
    polls = len(telegram.calls_to("getUpdates"))

    second = run_cli(tmp_path, env, "run")

    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert "another assistant is running on" in lines[0] and f"pid {first.proc.pid}" in lines[0]
    assert "BICAMERAL_DATA_DIR" in lines[0]
    assert "Traceback" not in second.stderr + second.stdout
    assert {p.name: digest(p) for p in db.parent.glob("bicameral.db*")} == before  # not even opened to migrate
    # The first one never lost its place: it still polls and answers.
    telegram.user_sends(OWNER, "are you there?")
    eventually_blocking(lambda: sent_texts(telegram) == ["still here"], "the first assistant to answer", timeout=30)
    assert len(telegram.calls_to("getUpdates")) > polls
    assert inbound_rows(db) == [("are you there?", "consumed")]


def test_two_started_at_once_on_a_fresh_data_dir_one_serves_the_other_exits_2(tmp_path, telegram, models, procs):
    models.responder(lambda req: Reply(text="only once"))
    env = bot_env(tmp_path, telegram, models)
    racers = [
        subprocess.Popen([sys.executable, "-m", "bicameral", "run"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        eventually_blocking(lambda: any(p.poll() is not None for p in racers), "one of the two to give way", timeout=60)
        loser = next(p for p in racers if p.poll() is not None)
        winner = next(p for p in racers if p is not loser)
        out, err = loser.communicate(timeout=10)
        assert loser.returncode == 2, err
        assert len(err.strip().splitlines()) == 1 and "another assistant is running on" in err
        assert "already exists" not in out + err and "Traceback" not in out + err
        assert winner.poll() is None
        telegram.user_sends(OWNER, "hello")
        eventually_blocking(lambda: sent_texts(telegram) == ["only once"], "the one left to answer", timeout=30)
    finally:
        for proc in racers:
            if proc.poll() is None:
                proc.terminate()
                proc.communicate(timeout=15)
