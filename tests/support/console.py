"""What the owner console's tests share: a friend and a group let in, and everyone else trying the owner's commands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.conftest import OWNER
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import quiet_for

FRIEND = 2002  # allowed in, in private and in GROUP
STRANGER = 777  # not allowed in anywhere
GROUP = -100777


async def allowing(start_bot: Any, **overrides: Any) -> Any:
    """A started assistant that lets FRIEND and GROUP in (debounce off)."""
    app = await start_bot(debounce_ms=0, **overrides)
    allowed = {"policy": "allowlist", "allowed_users": [FRIEND], "allowed_chats": [GROUP]}
    app.gate.access.save(app.gate.access.config.model_copy(update=allowed))
    return app


def texts(telegram: FakeTelegram, chat: int) -> list[str]:
    return [m["text"] for m in telegram.sent_messages(chat)]


async def everyone_else_tries(telegram: FakeTelegram, commands: Sequence[str], where: str) -> None:
    """FRIEND and STRANGER send every command in a DM or in a group, then as an edit, a forward of the owner's and a
    caption; the owner forwards one too. Returns once FRIEND's one real question is answered and a quiet window
    passed in which an answer to any command would have come."""
    sent = []
    for text in commands:
        if where == "dm":
            sent.append(telegram.user_sends(FRIEND, text))
            telegram.user_sends(STRANGER, text)  # not even allowed in: dropped before the refusal notice
        else:
            sent.append(telegram.user_sends(GROUP, text, user_id=FRIEND, chat_type="supergroup"))
            telegram.user_sends(GROUP - 1, text, user_id=STRANGER, chat_type="supergroup")
    telegram.user_edits(sent[0]["chat"]["id"], sent[0]["message_id"], commands[-1])
    telegram.user_sends(FRIEND, commands[0], forwarded_from=OWNER)
    chat, kind = (FRIEND, "private") if where == "dm" else (GROUP, "supergroup")
    telegram.user_sends(chat, "notes", user_id=FRIEND, document=("notes.txt", b"x"), caption=commands[0], chat_type=kind)
    telegram.user_sends(OWNER, commands[0], forwarded_from=FRIEND)  # the owner's own forward is no command either
    telegram.user_sends(FRIEND, "a real question")  # answered: the only thing that reaches a model
    await telegram.await_sent(FRIEND, 1)
    await quiet_for(0.5, "a late answer to one of the commands")


def nobody_was_answered(telegram: FakeTelegram) -> bool:
    """Only FRIEND's real question got an answer (the caption's document is not answered on its own)."""
    return (
        len(telegram.sent_messages(FRIEND)) == 1
        and telegram.sent_messages(GROUP) == []
        and telegram.sent_messages(GROUP - 1) == []
        and telegram.sent_messages(STRANGER) == []
        and telegram.sent_messages(OWNER) == []
    )
