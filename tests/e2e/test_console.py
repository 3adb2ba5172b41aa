"""The owner's console through the fake Bot API: /pause, /resume, /kill, /help, the command menu, and silence for
everyone else who sends an owner command, however it comes."""

from __future__ import annotations

import io
import os
import time

import pytest
from rich.console import Console as RichConsole

from bicameral.app import App
from bicameral.channels.terminal import TerminalChannel
from bicameral.console.control import KILL_EXIT_STATUS
from bicameral.events import chat_key
from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.support.chat import eventually, quiet_for
from tests.support.console import FRIEND, allowing, everyone_else_tries, nobody_was_answered, texts


async def test_pause_holds_everyone_but_the_owner_and_resume_answers_what_waited(telegram, models, start_bot):
    models.responder(lambda request: Reply(text="answer"))
    await allowing(start_bot)
    telegram.user_sends(OWNER, "/pause")
    paused = await telegram.await_sent(OWNER, 1)
    assert "Paused" in paused[0]["text"]
    telegram.user_sends(FRIEND, "are you there?")
    telegram.user_sends(OWNER, "and me?")
    await telegram.await_sent(OWNER, 2)  # the owner is answered while paused
    assert telegram.sent_messages(FRIEND) == []
    assert len(models.requests) == 1  # only the owner's message reached a model
    telegram.user_sends(OWNER, "/resume")
    resumed = await telegram.await_sent(OWNER, 3)
    assert "1 message(s) that waited" in resumed[2]["text"]
    assert (await telegram.await_sent(FRIEND, 1))[0]["text"] == "answer"


async def test_a_pause_outlives_a_restart(telegram, models, start_bot, make_settings):
    models.responder(lambda request: Reply(text="answer"))
    app = await allowing(start_bot)
    telegram.user_sends(OWNER, "/pause")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(FRIEND, "hello?")
    await eventually(lambda: telegram.acked_offset >= 2, "the friend's message to be taken in")
    await app.stop()
    again = await start_bot(debounce_ms=0)
    assert again.console.paused
    await quiet_for(0.5, "an answer to the friend, which must wait for /resume")
    assert telegram.sent_messages(FRIEND) == []
    telegram.user_sends(OWNER, "/resume")
    assert (await telegram.await_sent(FRIEND, 1))[0]["text"] == "answer"


async def test_kill_answers_then_stops_with_a_status_a_supervisor_restarts_on(telegram, models, start_bot):
    app = await start_bot(debounce_ms=0)
    telegram.user_sends(OWNER, "/kill")
    said = await telegram.await_sent(OWNER, 1)
    assert str(KILL_EXIT_STATUS) in said[0]["text"]
    await eventually(lambda: app._stop_requested.is_set(), "the app to be asked to stop")
    assert app.exit_code == KILL_EXIT_STATUS != 0


async def test_help_lists_what_the_caller_may_use(telegram, models, start_bot):
    await allowing(start_bot)
    telegram.user_sends(OWNER, "/help")
    telegram.user_sends(FRIEND, "/help")
    owner_help = (await telegram.await_sent(OWNER, 1))[0]["text"]
    friend_help = (await telegram.await_sent(FRIEND, 1))[0]["text"]
    assert "/pause" in owner_help and "/memory" in owner_help
    assert "/memory" in friend_help
    assert "/pause" not in friend_help and "/kill" not in friend_help and "owner" not in friend_help
    assert models.requests == []


async def test_the_menu_shows_each_person_their_commands(telegram, models, start_bot):
    await start_bot()
    await eventually(lambda: telegram.commands_for({"type": "chat", "chat_id": OWNER}) != telegram.commands, "the owner's menu")
    everyone = {c["command"] for c in telegram.commands}
    owner = {c["command"] for c in telegram.commands_for({"type": "chat", "chat_id": OWNER})}
    assert {"stop", "memory", "help"} <= everyone
    assert not everyone & {"pause", "resume", "kill"}
    assert {"pause", "resume", "kill", "stop", "help"} <= owner


OWNER_COMMANDS = ["/pause", "/resume", "/kill", "/pause now please", "/KILL", "/kill@bicameral_test_bot", "/kill@otherbot"]


@pytest.mark.parametrize("where", ["dm", "group"])
async def test_nobody_else_gets_anything_from_an_owner_command(telegram, models, start_bot, where):
    models.responder(lambda request: Reply(text="model answered"))
    app = await allowing(start_bot)
    await everyone_else_tries(telegram, OWNER_COMMANDS, where)
    assert nobody_was_answered(telegram) and texts(telegram, FRIEND) == ["model answered"]
    assert len(models.requests) == 1
    assert not app.console.paused and app.exit_code == 0 and not app._stop_requested.is_set()
    stored = app.stores.db.query("SELECT text FROM messages WHERE direction = 'in' AND sender_id != ?", (str(OWNER),))
    assert [row["text"] for row in stored if "kill" in row["text"] or "pause" in row["text"]] == []


async def test_the_owners_forwarded_or_edited_command_does_nothing(telegram, models, start_bot):
    app = await start_bot(debounce_ms=0)
    telegram.user_sends(OWNER, "/kill", forwarded_from=FRIEND)
    sent = telegram.user_sends(OWNER, "/help")
    await telegram.await_sent(OWNER, 1)
    telegram.user_edits(OWNER, sent["message_id"], "/kill")
    telegram.user_sends(OWNER, "/help")
    await telegram.await_sent(OWNER, 2)
    assert app.exit_code == 0 and not app._stop_requested.is_set()


async def test_reminders_still_fire_while_paused(telegram, models, start_bot):
    app = await allowing(start_bot)
    telegram.user_sends(OWNER, "/pause")
    await telegram.await_sent(OWNER, 1)
    app.stores.schedules.create(
        chat=chat_key("telegram", FRIEND), creator=chat_key("telegram", FRIEND), kind="text", body="water the plants",
        tz="UTC", next_due=time.time(), now=time.time(),
    )
    reminder = await telegram.await_sent(FRIEND, 1)
    assert "water the plants" in reminder[0]["text"]
    assert app.console.paused and models.requests == []


async def test_the_person_at_the_terminal_is_the_owner(make_settings):
    read_end, keyboard = os.pipe()
    stdin = os.fdopen(read_end, "r")
    screen = io.StringIO()
    terminal = TerminalChannel(stdin=stdin, console=RichConsole(file=screen, width=200))
    try:
        async with App(make_settings(telegram_token=None), [terminal]) as app:
            os.write(keyboard, b"/pause\n")
            await eventually(lambda: "Paused" in screen.getvalue(), "the terminal's /pause to be answered")
            assert app.console.paused
    finally:
        os.close(keyboard)
        stdin.close()
