"""A reply recorded in the outbox but not yet sent when the process is killed: after the restart it goes out once.

Found by `python -m bench --only scale` (the chaos run): the restarted assistant used to both deliver the recorded
reply from the outbox and, as the turn never settled, replay its message through a new turn, so the person was
answered twice. A turn's answer now holds the turn's messages from the moment it is recorded.
"""

from __future__ import annotations

import pytest

from tests.conftest import OWNER
from tests.e2e.test_process import bot_env, procs, sent_texts
from tests.fakes.model_server import Reply
from tests.support.chat import eventually_blocking, quiet_for_blocking

pytestmark = pytest.mark.slow
__all__ = ["procs"]  # the fixture, shared with test_process


@pytest.mark.parametrize("mode", ["single", "bicameral"])
def test_a_reply_recorded_but_unsent_at_a_kill_goes_out_once_after_the_restart(tmp_path, telegram, models, procs, mode):
    models.responder(lambda req: Reply(text="answered once"))
    env = bot_env(tmp_path, telegram, models, BICAMERAL_MODE=mode, BICAMERAL_FRONT_MODEL="openai:front")
    bot = procs(env, "run", telegram=telegram)
    bot.start()
    bot.wait_ready()
    telegram.hold("sendMessage", OWNER)  # never released: this request never reaches the chat

    telegram.user_sends(OWNER, "please answer once")
    eventually_blocking(
        lambda: any(str(c.params.get("chat_id")) == str(OWNER) for c in telegram.calls_to("sendMessage")),
        "the reply to be recorded and its sendMessage under way", timeout=30,
    )
    bot.kill()
    telegram.hold("sendMessage", OWNER).set()  # later sends go through; the killed one stays held

    bot.start()
    bot.wait_ready()
    eventually_blocking(lambda: "answered once" in sent_texts(telegram), "the reply after the restart", timeout=30)
    eventually_blocking(lambda: all(r.completed_at for r in models.requests), "model requests done", timeout=30)
    quiet_for_blocking(2.0, "a second reply, were one coming, would be here by now")
    assert sent_texts(telegram) == ["answered once"]
