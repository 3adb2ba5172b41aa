"""`bicameral run` as a process serving Matrix alone: it answers a DM; a revoked token stops it with status 1, a
wrong password at start with status 2 and one line, as Telegram's revoked and wrong tokens do."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.test_process import OPENAI_KEY, BotProcess, clean_env, run_cli
from tests.fakes.model_server import Reply
from tests.support.chat import eventually


def matrix_env(tmp_path, synapse, bot, models, **extra) -> dict[str, str]:
    values = dict(
        BICAMERAL_MATRIX_HOMESERVER=synapse.url,
        BICAMERAL_MATRIX_USER_ID=bot.user_id,
        BICAMERAL_MATRIX_PASSWORD=bot.password,
        BICAMERAL_DATA_DIR=tmp_path / "data",
        BICAMERAL_BACK_MODEL="openai:back",
        BICAMERAL_MODE="single",
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL=models.openai_url,
        BICAMERAL_DEBOUNCE_MS=100,
    )
    return clean_env(**{**values, **extra})


@pytest.mark.timeout(240)
async def test_run_serves_matrix_alone_and_a_revoked_token_exits_1(tmp_path, synapse, matrix_user, human, models):
    models.responder(lambda request: Reply(text="from the process"))
    bot, ann = matrix_user("bot"), human("ann")
    env = matrix_env(tmp_path, synapse, bot, models, BICAMERAL_MATRIX_OWNER_ID=ann.user.user_id)
    with BotProcess(tmp_path, env, "run") as process:
        process.start()
        session = tmp_path / "data" / "matrix" / "session.json"
        await eventually(session.exists, "the process to log in", timeout=60)
        room = await ann.room(bot.user_id, direct=True)
        await ann.say(room, "hello process")
        assert (await ann.await_from(room, bot.user_id, timeout=60))[0]["content"]["body"] == "from the process"
        token = json.loads(session.read_text())["access_token"]
        async with httpx.AsyncClient() as client:
            await client.post(f"{synapse.url}/_matrix/client/v3/logout", headers={"Authorization": f"Bearer {token}"})
        await eventually(lambda: process.proc.poll() is not None, "the process to stop", timeout=60)
        assert process.proc.returncode == 1
        assert "M_UNKNOWN_TOKEN" in process.output() and token not in process.output()


@pytest.mark.timeout(240)
def test_a_wrong_password_exits_2_with_one_line(tmp_path, synapse, matrix_user, models):
    bot = matrix_user("bot")
    env = matrix_env(tmp_path, synapse, bot, models, BICAMERAL_MATRIX_PASSWORD="not-the-password")
    result = run_cli(tmp_path, env, "run", timeout=180)  # a whole start on a machine that may be busy
    assert result.returncode == 2
    assert "check BICAMERAL_MATRIX_USER_ID and BICAMERAL_MATRIX_PASSWORD" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout and "not-the-password" not in result.stderr + result.stdout
