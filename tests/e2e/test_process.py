"""The assistant as a real process: `python -m bicameral run | chat | doctor` against the fakes.

Every test builds its own environment (nothing inherited from the developer's BICAMERAL_*,
ANTHROPIC_* or OPENAI_* variables), keeps its data under tmp_path and runs with cwd=tmp_path,
so no stray `.env` or `bicameral.toml` is read.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from tests.conftest import OWNER
from tests.fakes.model_server import ModelServer, Reply, Request
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually_blocking, quiet_for_blocking

pytestmark = pytest.mark.slow

OPENAI_KEY = "sk-proj-fakeOpenAIkeyForProcessTests0123456789"


# --------------------------------------------------------------------------- helpers


def clean_env(**values: object) -> dict[str, str]:
    """The parent's environment minus every setting bicameral reads, plus `values`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BICAMERAL_", "ANTHROPIC_", "OPENAI_"))}
    # Unbuffered output so the test can read it live; wide lines so rich does not wrap them.
    env.update(PYTHONUNBUFFERED="1", COLUMNS="250", NO_COLOR="1")
    env.update({k: str(v) for k, v in values.items()})
    return env


def bot_env(tmp_path: Path, telegram: FakeTelegram, models: ModelServer, **extra: object) -> dict[str, str]:
    """A `bicameral run` environment wired to the fakes."""
    values: dict[str, object] = dict(
        BICAMERAL_TELEGRAM_TOKEN=telegram.token,
        BICAMERAL_TELEGRAM_API_URL=telegram.url,
        BICAMERAL_OWNER_ID=OWNER,
        BICAMERAL_DATA_DIR=tmp_path / "data",
        BICAMERAL_BACK_MODEL="openai:back",
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL=models.openai_url,
        BICAMERAL_DEBOUNCE_MS=100,
        BICAMERAL_TELEGRAM_POLL_TIMEOUT=1,
    )
    values.update(extra)
    return clean_env(**values)


class BotProcess:
    """One `python -m bicameral ...` process, restartable; output goes to files under tmp_path."""

    def __init__(
        self,
        tmp_path: Path,
        env: dict[str, str],
        *args: str,
        name: str = "bot",
        telegram: FakeTelegram | None = None,
        stdin_pipe: bool = False,
    ) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.args = args or ("run",)
        self.name = name
        self.telegram = telegram
        self.stdin_pipe = stdin_pipe
        self.proc: subprocess.Popen[str] | None = None
        self.runs = 0
        self._polls_at_start = 0
        self._files: list[IO[str]] = []
        self.out_path = self.err_path = tmp_path / f"{name}.out"

    # --- lifecycle ---

    def start(self) -> BotProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.runs += 1
        self.out_path = self.tmp_path / f"{self.name}-{self.runs}.stdout"
        self.err_path = self.tmp_path / f"{self.name}-{self.runs}.stderr"
        out, err = open(self.out_path, "w"), open(self.err_path, "w")
        self._files += [out, err]
        if self.telegram is not None:
            self._polls_at_start = len(self.telegram.calls_to("getUpdates"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bicameral", *self.args],
            cwd=self.tmp_path,
            env=self.env,
            stdin=subprocess.PIPE if self.stdin_pipe else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            text=True,
        )
        return self

    def wait_ready(self, timeout: float = 30) -> None:
        """Ready = the fake saw this run's first getUpdates (so recovery already ran)."""
        assert self.telegram is not None
        telegram = self.telegram

        def polled() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode} before polling:\n{self.output()}")
            return len(telegram.calls_to("getUpdates")) > self._polls_at_start

        eventually_blocking(polled, f"{self.name} to poll getUpdates", timeout=timeout)

    def kill(self) -> None:
        """kill -9: no cleanup of any kind runs in the process."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM and wait (the clean shutdown path); SIGKILL if it does not exit."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    def wait_exit(self, timeout: float = 30) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} still running after {timeout}s:\n{self.output()}") from None

    def close(self) -> None:
        self.stop()
        for f in self._files:
            f.close()

    def __enter__(self) -> BotProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- I/O ---

    def write(self, line: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def output(self) -> str:
        """Every run's stdout and stderr, labelled."""
        parts = []
        for run in range(1, self.runs + 1):
            for stream in ("stdout", "stderr"):
                path = self.tmp_path / f"{self.name}-{run}.{stream}"
                text = path.read_text(errors="replace") if path.exists() else ""
                parts.append(f"----- {self.name} run {run} {stream} -----\n{text}")
        return "\n".join(parts)


@pytest.fixture
def procs(tmp_path):
    """Make BotProcess objects; all are stopped at teardown and their output is printed
    (pytest shows it only when the test failed)."""
    made: list[BotProcess] = []

    def make(env: dict[str, str], *args: str, **kwargs: Any) -> BotProcess:
        kwargs.setdefault("name", f"p{len(made) + 1}")
        proc = BotProcess(tmp_path, env, *args, **kwargs)
        made.append(proc)
        return proc

    yield make
    for proc in made:
        proc.close()
        print(proc.output())


def run_cli(tmp_path: Path, env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m bicameral *args` to completion."""
    result = subprocess.run(
        [sys.executable, "-m", "bicameral", *args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(f"$ bicameral {' '.join(args)} -> {result.returncode}\n--stdout--\n{result.stdout}\n--stderr--\n{result.stderr}")
    return result


def inbound_rows(db: Path) -> list[tuple[str, str]]:
    """(text, status) of every inbound row, oldest first."""
    conn = sqlite3.connect(db, timeout=5)
    try:
        return [tuple(r) for r in conn.execute("SELECT text, status FROM messages WHERE direction = 'in' ORDER BY id")]
    finally:
        conn.close()


def sent_texts(telegram: FakeTelegram) -> list[str]:
    return [m.get("text", "") for m in telegram.sent_messages(OWNER)]


# --------------------------------------------------------------------------- 1. crash safety

WORDS = ("first", "second")


def answer_for(req: Request) -> str:
    """The scripted answer names which user messages the request carried."""
    seen = [w for w in WORDS if w in req.last_user_text()]
    return "answer to " + " and ".join(seen) if seen else "answer to nothing"


def test_killed_mid_turn_and_restarted_loses_nothing_and_sends_no_duplicate(tmp_path, telegram, models, procs):
    models.responder(lambda req: Reply(text=answer_for(req), latency=3.0))
    bot = procs(bot_env(tmp_path, telegram, models), "run", telegram=telegram)

    bot.start().wait_ready()
    telegram.user_sends(OWNER, "first")
    models.wait_for_requests(1, timeout=15)
    assert "first" in models.requests[0].last_user_text()
    bot.kill()  # mid-turn: the model is still "thinking"
    assert sent_texts(telegram) == []

    telegram.user_sends(OWNER, "second")  # arrives while the assistant is down
    requests_before_restart = len(models.requests)
    bot.start().wait_ready()

    # Both messages get answered: together in one turn, or in two turns.
    def answered() -> bool:
        joined = " ".join(sent_texts(telegram))
        return all(w in joined for w in WORDS)

    eventually_blocking(answered, "answers covering 'first' and 'second'", timeout=30)
    db = tmp_path / "data" / "bicameral.db"
    eventually_blocking(lambda: all(s == "consumed" for _, s in inbound_rows(db)), "both inbound rows consumed", timeout=10)
    eventually_blocking(
        lambda: all(r.completed_at for r in models.requests[requests_before_restart:]), "model requests done", timeout=10
    )
    quiet_for_blocking(1.0, "every request is done: a duplicate reply, were one coming, would be here by now")

    after = models.requests[requests_before_restart:]
    for word in WORDS:
        assert any(word in r.last_user_text() for r in after), f"{word!r} never reached the model after the restart"
    texts = sent_texts(telegram)
    assert len(texts) == len(set(texts)), f"a reply was sent twice: {texts}"
    # One reply per answered model request: no turn answered twice, none left silent.
    assert sorted(texts) == sorted(answer_for(r) for r in after)
    rows = inbound_rows(db)
    assert sorted(t for t, _ in rows) == ["first", "second"]
    assert {s for _, s in rows} == {"consumed"}


def test_killed_right_after_the_reply_was_sent_does_not_answer_again(tmp_path, telegram, models, procs):
    models.responder(lambda req: Reply(text="hello back"))
    bot = procs(bot_env(tmp_path, telegram, models), "run", telegram=telegram)
    db = tmp_path / "data" / "bicameral.db"

    bot.start().wait_ready()
    telegram.user_sends(OWNER, "hello")
    telegram.wait_for_call("sendMessage", timeout=15)
    # "Sent" from the bot's side: it saw Telegram accept the reply and recorded it. (Killing the
    # instant the fake answers lands before the bot has read the response; that message then
    # stays pending and is answered again after the restart, by design: at-least-once.)
    eventually_blocking(lambda: inbound_rows(db) == [("hello", "consumed")], "the bot to record its reply", timeout=10)
    bot.kill()
    requests_before_restart = len(models.requests)

    bot.start().wait_ready()
    quiet_for_blocking(2.0, "a replayed turn would debounce (0.1 s), ask the model and answer well within this")
    assert sent_texts(telegram) == ["hello back"]
    assert len(models.requests) == requests_before_restart
    assert inbound_rows(db) == [("hello", "consumed")]


# --------------------------------------------------------------------------- 2-4. start-up errors


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("BICAMERAL_MODE", "sideways", "mode"),
        ("BICAMERAL_BACK_MODEL", "gpt-4", "back_model"),
        ("BICAMERAL_DEBOUNCE_MS", "-5", "debounce_ms"),
        ("bicameral.toml", "debounce_ms = [1,\n", "bicameral.toml"),
    ],
)
def test_broken_config_exits_2_naming_the_setting(tmp_path, setting, value, named):
    values = {"BICAMERAL_TELEGRAM_TOKEN": "123456:TEST", "BICAMERAL_DATA_DIR": tmp_path / "data"}
    if setting == "bicameral.toml":
        (tmp_path / "bicameral.toml").write_text(value)
    else:
        values[setting] = value
    result = run_cli(tmp_path, clean_env(**values), "run", timeout=30)
    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_no_channel_configured_exits_2_with_a_hint(tmp_path):
    result = run_cli(tmp_path, clean_env(BICAMERAL_DATA_DIR=tmp_path / "data"), "run", timeout=30)
    assert result.returncode == 2
    assert "BICAMERAL_TELEGRAM_TOKEN" in result.stderr
    assert "bicameral chat" in result.stderr
    assert "Traceback" not in result.stderr


def test_wrong_token_exits_with_a_message_to_check_it(tmp_path, telegram, models):
    env = bot_env(tmp_path, telegram, models, BICAMERAL_TELEGRAM_TOKEN="999999:WRONG")
    result = run_cli(tmp_path, env, "run", timeout=30)
    assert result.returncode == 2
    assert "check BICAMERAL_TELEGRAM_TOKEN" in result.stderr
    assert "Traceback" not in result.stderr
    assert "999999:WRONG" not in result.stdout + result.stderr
    assert telegram.calls_to("getMe")[0].status == 401


def test_malformed_token_exits_2_with_one_line(tmp_path):
    env = clean_env(BICAMERAL_TELEGRAM_TOKEN="not-a-token", BICAMERAL_DATA_DIR=tmp_path / "data")
    result = run_cli(tmp_path, env, "run", timeout=30)
    assert result.returncode == 2
    assert "not a valid bot token" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_another_poller_stops_the_running_bot_with_status_1(tmp_path, telegram, models, procs):
    bot = procs(bot_env(tmp_path, telegram, models), "run", telegram=telegram).start()
    bot.wait_ready()
    telegram.fail_next("getUpdates", status=409, description="Conflict: terminated by other getUpdates request")
    assert bot.wait_exit(60) == 1
    assert "another process polling this bot token" in bot.output()


# --------------------------------------------------------------------------- 5. terminal chat


def chat_env(tmp_path: Path, models: ModelServer) -> dict[str, str]:
    return clean_env(
        BICAMERAL_DATA_DIR=tmp_path / "data",
        BICAMERAL_BACK_MODEL="openai:back",
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL=models.openai_url,
        BICAMERAL_DEBOUNCE_MS=0,
    )


def test_chat_in_the_terminal_answers_and_exits_0_on_eof(tmp_path, models, procs):
    models.script(Reply(text="Hello from the scripted model"))
    chat = procs(chat_env(tmp_path, models), "chat", stdin_pipe=True).start()
    chat.write("hello")
    eventually_blocking(lambda: "Hello from the scripted model" in chat.stdout, "the scripted reply on stdout", timeout=30)
    chat.close_stdin()
    assert chat.wait_exit(20) == 0
    assert "hello" in models.requests[0].last_user_text()
    assert "Traceback" not in chat.stderr


def test_reset_in_the_terminal_confirms(tmp_path, models, procs):
    chat = procs(chat_env(tmp_path, models), "chat", stdin_pipe=True).start()
    chat.write("/reset")
    eventually_blocking(lambda: "Fresh start" in chat.stdout, "the reset confirmation on stdout", timeout=30)
    assert "cleared our conversation" in chat.stdout
    chat.close_stdin()
    assert chat.wait_exit(20) == 0
    assert models.requests == []


# --------------------------------------------------------------------------- 6. doctor


def doctor_line(output: str, name: str) -> str:
    lines = [line for line in output.splitlines() if line[2:].startswith(f"{name}:")]
    assert lines, f"no {name!r} line in doctor output:\n{output}"
    return lines[0]


def test_doctor_passes_against_the_fakes(tmp_path, telegram, models):
    result = run_cli(tmp_path, bot_env(tmp_path, telegram, models), "doctor")
    assert result.returncode == 0
    for name in ("telegram", "back model", "data dir"):
        assert doctor_line(result.stdout, name).startswith("✓"), name
    assert OPENAI_KEY not in result.stdout + result.stderr


def test_doctor_with_a_wrong_token_says_what_to_fix(tmp_path, telegram, models):
    env = bot_env(tmp_path, telegram, models, BICAMERAL_TELEGRAM_TOKEN="999999:WRONG")
    result = run_cli(tmp_path, env, "doctor")
    assert result.returncode == 1
    line = doctor_line(result.stdout, "telegram")
    assert line.startswith("✗")
    assert "BICAMERAL_TELEGRAM_TOKEN" in line
    assert doctor_line(result.stdout, "back model").startswith("✓")


def test_doctor_with_a_data_dir_that_is_a_file_names_it(tmp_path, telegram, models):
    not_a_dir = tmp_path / "data-file"
    not_a_dir.write_text("I am a file")
    env = bot_env(tmp_path, telegram, models, BICAMERAL_DATA_DIR=not_a_dir)
    result = run_cli(tmp_path, env, "doctor")
    assert result.returncode == 1
    line = doctor_line(result.stdout, "data dir")
    assert line.startswith("✗")
    assert str(not_a_dir) in line and "BICAMERAL_DATA_DIR" in line


# --------------------------------------------------------------------------- 7. secrets


def test_pasted_and_configured_secrets_stay_out_of_the_database_and_logs(tmp_path, models, procs):
    bot_token = "7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"
    anthropic_key = "sk-ant-api03-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kL9n"
    github_token = "ghp_" + "x1Y2z3A4b5C6d7E8f9G0h1I2j3K4l5M6n7O8"
    assert len(anthropic_key) == len("sk-ant-api03-") + 40
    models.responder(lambda req: Reply(text="Noted. You wrote: " + req.last_user_text()[-300:]))
    with FakeTelegram(token=bot_token) as telegram:
        bot = procs(bot_env(tmp_path, telegram, models), "run", telegram=telegram)
        bot.start().wait_ready()
        telegram.user_sends(OWNER, f"here is my key {anthropic_key} keep it safe")
        telegram.wait_for_sent(OWNER, 1, timeout=20)
        telegram.user_sends(OWNER, f"and my github token: {github_token}")
        telegram.wait_for_sent(OWNER, 2, timeout=20)
        assert bot.stop() == 0  # a clean stop checkpoints the WAL into the database file

    data = tmp_path / "data"
    stored = [p for p in data.glob("bicameral.db*") if p.is_file()]
    logs = list((data / "logs").glob("*.log*"))
    assert stored and logs
    assert any(b"[REDACTED" in p.read_bytes() for p in stored), "the pasted keys should be stored redacted"
    for secret in (anthropic_key, github_token, bot_token, OPENAI_KEY):
        for path in [*stored, *logs]:
            assert secret.encode() not in path.read_bytes(), f"{secret[:12]}… found in {path.name}"
        assert secret not in bot.stdout + bot.stderr, f"{secret[:12]}… on the console"
    prompts = json.dumps([r.raw for r in models.requests])
    assert anthropic_key not in prompts and github_token not in prompts, "the model saw a pasted secret"


# --------------------------------------------------------------------------- 8. the embedded default


@pytest.mark.local_model
@pytest.mark.timeout(240)
def test_chat_with_no_keys_answers_from_the_bundled_local_model(tmp_path, procs):
    pytest.importorskip("llama_cpp")
    env = clean_env(BICAMERAL_DATA_DIR=tmp_path / "data", BICAMERAL_DEBOUNCE_MS=0)
    chat = procs(env, "chat", stdin_pipe=True).start()
    chat.write("Say hi")

    def reply() -> str:
        # The reply is printed after the "bicameral ›" prompt, possibly on the following lines.
        _, sep, tail = chat.stdout.partition("bicameral ›")
        return tail.strip() if sep else ""

    text = eventually_blocking(reply, "a reply from the local model", timeout=120, interval=0.5)
    chat.close_stdin()  # the end of input lets the turn finish its reply before the process exits
    assert chat.wait_exit(60) == 0
    assert text
    assert "went wrong" not in chat.stdout.lower()
