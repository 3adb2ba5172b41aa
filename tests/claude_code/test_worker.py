"""The worker against a scripted fake CLI: noise on the wire, questions from the CLI, its own diagnostics."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bicameral.claude_code.config import WorkerConfig
from bicameral.claude_code.exchange import Prompt
from bicameral.claude_code.spec import LaunchOptions
from bicameral.claude_code.supervision import CrashBudget, SessionIds
from bicameral.claude_code.worker import ClaudeCodeWorker
from bicameral.mcp.server import McpToolServer
from bicameral.store import Stores
from bicameral.tools.registry import ToolRegistry
from tests.claude_code.fake_cli import write_fake_cli
from tests.conftest import OWNER
from tests.support.chat import eventually, quiet_for


@pytest.fixture
async def make_worker(tmp_path):
    mcp = McpToolServer()
    await mcp.start()
    stores = Stores.open(tmp_path / "db.sqlite")
    workers: list[ClaudeCodeWorker] = []

    def make(scenario: str) -> ClaudeCodeWorker:
        binary = write_fake_cli(tmp_path / f"claude-{scenario}", scenario)
        launch = LaunchOptions(
            binary=str(binary),
            model="fake",
            effort="low",
            cwd=tmp_path / "work",
            home=tmp_path / "home",
            base_env={"PATH": "/usr/bin:/bin"},
        )
        config = WorkerConfig(launch=launch, capture_dir=tmp_path / "cc_logs", token_dir=tmp_path / "mcp")
        worker = ClaudeCodeWorker(
            "test",
            config,
            sessions=SessionIds(stores.kv, "claude_code.session:test"),
            mcp=mcp,
            tools=ToolRegistry.discover(),
            budget=CrashBudget(10, 600),
        )
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        await worker.stop()
    await mcp.stop()
    stores.close()


async def test_malformed_lines_mid_turn_are_skipped_and_the_turn_completes(make_worker, caplog, tmp_path):
    caplog.set_level(logging.WARNING)
    worker = make_worker("garbage")
    outcome = await worker.run_turn(Prompt("hi"))
    assert outcome.ok and outcome.texts == ["hello through the noise"]
    assert outcome.result is not None and not outcome.result.is_error
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 3
    again = await worker.run_turn(Prompt("still there?"))
    assert again.ok and again.texts == ["hello through the noise"]
    capture = (tmp_path / "cc_logs" / f"{outcome.session_id}.stream.jsonl").read_text()
    assert "this is not json" in capture  # the wire log keeps what the parser dropped


async def test_a_question_from_the_cli_is_declined_not_left_hanging(make_worker):
    worker = make_worker("asks")
    outcome = await worker.run_turn(Prompt("do something risky"))
    assert outcome.texts == ["the host said error"]


async def test_the_session_id_is_stored_after_a_completed_turn(make_worker, tmp_path):
    worker = make_worker("garbage")
    outcome = await worker.run_turn(Prompt("hi"))
    stored = SessionIds(Stores.open(tmp_path / "db.sqlite").kv, "claude_code.session:test")
    assert stored.get() == outcome.session_id
    await worker.stop()
    assert stored.get() == outcome.session_id  # a clean stop keeps it for the next start


async def test_the_cli_s_own_diagnostic_is_classified_and_explained(telegram, models, start_bot, tmp_path, cli_home):
    fake = write_fake_cli(tmp_path / "claude-auth", "synthetic-auth")
    await start_bot(
        mode="single",
        back_model="claude-code:claude-sonnet-4-5",
        claude_bin=str(fake),
        dropped_text_max_retries=2,
        debounce_ms=50,
    )
    telegram.user_sends(OWNER, "hello?")
    sent = await telegram.await_sent(OWNER, 1, timeout=20)
    assert "credentials were rejected" in sent[0]["text"]
    assert "Invalid API key" not in sent[0]["text"]
    await quiet_for(0.3, "a nudge, and the message it leads to, would have come by now")
    assert len(telegram.sent_messages(OWNER)) == 1  # explained once, not nudged: the model never wrote it


async def test_crashes_back_off_exponentially_then_the_worker_gives_up(tmp_path):
    """A CLI that dies at once: respawns wait 2, 4, 8 … 64 s (slept through an injected sleep), the tenth gives up."""
    mcp = McpToolServer()
    await mcp.start()
    stores = Stores.open(tmp_path / "db.sqlite")
    waits: list[float] = []
    gave_up: list[str] = []

    async def sleep(seconds: float) -> None:
        if seconds == config.liveness_poll:
            await asyncio.sleep(0.05)  # the watchdog's poll: real, short
        else:
            waits.append(seconds)  # a respawn backoff: recorded, not waited
            await asyncio.sleep(0)

    async def on_giveup(failure) -> None:
        gave_up.append(failure.kind)

    launch = LaunchOptions(binary="/bin/false", model="m", effort="low", cwd=tmp_path / "w", home=tmp_path / "h")
    config = WorkerConfig(launch=launch, capture_dir=tmp_path / "c", token_dir=tmp_path / "mcp")
    worker = ClaudeCodeWorker(
        "crashy",
        config,
        sessions=SessionIds(stores.kv, "claude_code.session:crashy"),
        mcp=mcp,
        tools=ToolRegistry.discover(),
        budget=CrashBudget(10, 600),
        on_giveup=on_giveup,
        sleep=sleep,
    )
    try:
        outcome = await worker.run_turn(Prompt("hello"))
        # The instant backoff lets respawns race the turn: the budget may run out before its second restart.
        assert outcome.failure is not None and outcome.failure.kind == "crash" and outcome.restarts in (1, 2)
        await eventually(lambda: gave_up, "the worker to give up")
        assert gave_up == ["crash"] and worker.gave_up
        assert waits == [2, 4, 8, 16, 32, 64, 64, 64, 64]
        after = await worker.run_turn(Prompt("anyone?"))
        assert after.failure is not None and after.failure.kind == "crash"  # no more spawns after giving up
        assert len(worker.spawns) == 10
    finally:
        await worker.stop()
        await mcp.stop()
        stores.close()
