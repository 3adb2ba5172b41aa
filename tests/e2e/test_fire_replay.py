"""A reminder recorded in the outbox but not yet sent when the process is killed: after the restart it goes out once.

The fire counted as delivered only once its send returned; a kill before that left it pending, and the restart
both delivered the recorded message from the outbox and fired the reminder again.
"""

from __future__ import annotations

import time

import pytest

from bicameral.store import Stores
from tests.conftest import OWNER
from tests.e2e.test_process import bot_env, procs, sent_texts
from tests.fakes.model_server import Reply
from tests.support.chat import eventually_blocking, quiet_for_blocking

pytestmark = pytest.mark.slow
__all__ = ["procs"]  # the fixture, shared with test_process

REMINDED = "⏰ Reminder: water the plants"


def test_a_reminder_recorded_but_unsent_at_a_kill_goes_out_once_after_the_restart(tmp_path, telegram, models, procs):
    models.responder(lambda req: Reply(text="hello"))
    data = tmp_path / "data"
    data.mkdir()
    stores = Stores.open(data / "bicameral.db")
    now = time.time()
    stores.schedules.create(chat=f"telegram:{OWNER}", creator=f"telegram:{OWNER}", kind="text",
                            body="water the plants", tz="UTC", next_due=now - 5, now=now - 60)
    stores.close()
    telegram.hold("sendMessage", OWNER)  # never released: this request never reaches the chat
    bot = procs(bot_env(tmp_path, telegram, models), "run", telegram=telegram)
    bot.start()
    eventually_blocking(
        lambda: any(str(c.params.get("chat_id")) == str(OWNER) for c in telegram.calls_to("sendMessage")),
        "the reminder to be recorded and its sendMessage under way", timeout=30,
    )
    bot.kill()
    telegram.hold("sendMessage", OWNER).set()  # later sends go through; the killed one stays held

    bot.start()
    bot.wait_ready()
    eventually_blocking(lambda: REMINDED in sent_texts(telegram), "the reminder after the restart", timeout=30)
    quiet_for_blocking(2.0, "a second reminder, were one coming, would be here by now")
    assert sent_texts(telegram).count(REMINDED) == 1
