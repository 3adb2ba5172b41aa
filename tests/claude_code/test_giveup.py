"""A CLI that keeps crashing: the owner and active chats are told, and `bicameral run` exits non-zero."""

from __future__ import annotations

import pytest

from tests.conftest import OWNER
from tests.e2e.test_process import BotProcess, bot_env

pytestmark = pytest.mark.slow

# A stand-in for a broken install: it announces a session, complains on stderr and dies at once.
FAKE_CLAUDE = """#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"00000000-0000-4000-8000-000000000001","tools":[]}'
echo 'Error: the native module failed to load' >&2
exit 3
"""


def fake_cli(tmp_path, name: str, script: str):
    """An executable stand-in for `claude` under tmp_path."""
    path = tmp_path / name
    path.write_text(script)
    path.chmod(0o755)
    return path


def cc_env(tmp_path, telegram, models, claude_bin, **extra):
    """`bicameral run` in single mode with `claude_bin` as the executor."""
    return bot_env(
        tmp_path,
        telegram,
        models,
        BICAMERAL_MODE="single",
        BICAMERAL_BACK_MODEL="claude-code:claude-sonnet-4-5",
        BICAMERAL_CLAUDE_BIN=claude_bin,
        **extra,
    )


def test_crash_loop_gives_up_tells_the_owner_and_exits_non_zero(tmp_path, telegram, models):
    fake = fake_cli(tmp_path, "fake-claude", FAKE_CLAUDE)
    env = cc_env(tmp_path, telegram, models, fake, BICAMERAL_CRASH_BACKOFF_BASE=0.05, BICAMERAL_CRASH_BACKOFF_CAP=0.2)
    with BotProcess(tmp_path, env, telegram=telegram) as bot:
        bot.start()
        bot.wait_ready()
        telegram.user_sends(OWNER, "are you there?")
        code = bot.wait_exit(60)
        assert code == 1, bot.output()
        texts = [m["text"] for m in telegram.sent_messages(OWNER)]
        notice = [t for t in texts if "shutting down" in t]
        assert len(notice) == 1, texts
        assert "keeps crashing" in notice[0] and "10 times" in notice[0]
        assert "the Claude Code executor gave up" in bot.output()
    stderr_logs = list((tmp_path / "data" / "cc_logs").glob("*.stderr.log"))
    assert stderr_logs and "native module failed to load" in "".join(p.read_text() for p in stderr_logs)


def test_a_missing_cli_gives_up_at_once_with_a_clear_message(tmp_path, telegram, models):
    env = cc_env(tmp_path, telegram, models, tmp_path / "no-such-claude")
    with BotProcess(tmp_path, env, telegram=telegram) as bot:
        bot.start()
        bot.wait_ready()
        telegram.user_sends(OWNER, "hello")
        code = bot.wait_exit(30)
        assert code == 1, bot.output()
        texts = [m["text"] for m in telegram.sent_messages(OWNER)]
        assert any("not installed" in t and "BICAMERAL_CLAUDE_BIN" in t for t in texts), texts


def test_a_cli_too_old_for_always_load_stops_start_up_with_the_reason(tmp_path, telegram, models):
    fake = fake_cli(tmp_path, "old-claude", "#!/bin/sh\necho '2.1.100 (Claude Code)'\n")
    env = cc_env(tmp_path, telegram, models, fake)
    with BotProcess(tmp_path, env, telegram=telegram) as bot:
        bot.start()
        code = bot.wait_exit(30)
        assert code == 2
        assert "2.1.121 or newer" in bot.stderr and "2.1.100" in bot.stderr


def test_a_broken_plugins_file_stops_start_up_with_the_reason(tmp_path, telegram, models):
    data = tmp_path / "data"
    data.mkdir()
    (data / "plugins.json").write_text('{"tool_groups": {"bash": true, "shell": true}}')
    fake = fake_cli(tmp_path, "claude", "#!/bin/sh\necho '2.1.330 (Claude Code)'\n")
    env = cc_env(tmp_path, telegram, models, fake)
    with BotProcess(tmp_path, env, telegram=telegram) as bot:
        bot.start()
        assert bot.wait_exit(30) == 2
        assert "plugins.json is invalid: tool_groups.shell" in bot.stderr
