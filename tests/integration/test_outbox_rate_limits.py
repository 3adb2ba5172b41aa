"""When Telegram asks us to slow down (429), the outbox alone waits: through the real channel and the fake Bot API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bicameral.app import telegram_config
from bicameral.channels.telegram import TelegramChannel
from bicameral.config import Settings
from bicameral.delivery.outbox import Outbox
from bicameral.delivery.router import ActionRouter
from bicameral.events import DeleteMessage, EditText, React, SendText, Typing
from bicameral.store.db import Database
from bicameral.store.messages import MessageStore
from bicameral.store.outbox import OutboxStore
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually, quiet_for

DM = 4242
CHAT = f"telegram:{DM}"
# Six paragraphs of about 1 100 characters: more than one Telegram message holds.
LONG = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 40 for i in range(6))


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(bot_username="bicameral_test_bot").start()
    yield server
    server.stop()
    assert server.errors == []


class Wired:
    """An outbox delivering through the Telegram channel; `restart` is a new process on the same database."""

    def __init__(self, tmp_path: Path, fake: FakeTelegram) -> None:
        self.settings = Settings.for_test(tmp_path, telegram_token=fake.token, telegram_api_url=fake.url)
        self.db = Database(tmp_path / "db.sqlite")
        self.messages, self.store = MessageStore(self.db), OutboxStore(self.db)
        self.channels: list[TelegramChannel] = []
        self.outbox = self._outbox()

    def _outbox(self) -> Outbox:
        channel = TelegramChannel(telegram_config(self.settings))
        self.channels.append(channel)
        router = ActionRouter(self.messages)
        router.register(channel)
        return Outbox(self.store, router, retry_base=0.05, retry_cap=0.2)

    async def restart(self) -> None:
        await self.outbox.stop()
        self.outbox = self._outbox()
        await self.outbox.start()

    async def close(self) -> None:
        await self.outbox.stop()
        for channel in self.channels:
            await channel.stop()


@pytest.fixture
async def wired(tmp_path: Path, fake: FakeTelegram) -> AsyncIterator[Wired]:
    wired = Wired(tmp_path, fake)
    await wired.outbox.start()
    yield wired
    await wired.close()


def _sends(fake: FakeTelegram) -> list:
    return fake.calls_to("sendMessage")


async def test_a_429_on_the_second_part_sends_the_first_once_and_the_rest_after_the_wait(
    fake: FakeTelegram, wired: Wired
) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=1, after=1)
    [result] = await wired.outbox.send([SendText(CHAT, LONG)])
    assert result.queued  # the first part is out; the rest waits in the outbox, not in the channel
    await eventually(lambda: wired.store.pending() == [], "the rest of the text")

    sent = fake.sent_messages(DM)
    assert len(sent) >= 2 and " ".join(m["text"] for m in sent).split() == LONG.split()  # every part once, in order
    first, refused, second = _sends(fake)[:3]
    assert refused.status == 429 and first.params["text"] == sent[0]["text"] != second.params["text"]
    assert second.ts - refused.ts >= 0.9  # Telegram's wait, kept by the outbox
    # The chat's history holds every part once, as when nothing was refused.
    assert [m["message_id"] for m in wired.messages.recent(CHAT)] == [str(m["message_id"]) for m in sent]


async def test_a_restart_while_the_rest_of_a_text_waits_still_sends_only_the_rest(fake: FakeTelegram, wired: Wired) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=2, after=1)
    await wired.outbox.send([SendText(CHAT, LONG)])
    [waiting] = wired.store.pending()
    assert len(waiting.parts_sent) == 1
    await wired.restart()  # the new process knows the text only from the store
    await eventually(lambda: wired.store.pending() == [], "the rest of the text after the restart")
    sent = fake.sent_messages(DM)
    assert " ".join(m["text"] for m in sent).split() == LONG.split()
    assert str(sent[0]["message_id"]) == waiting.parts_sent[0]


async def test_an_edit_and_a_deletion_refused_for_now_are_made_after_the_wait(fake: FakeTelegram, wired: Wired) -> None:
    [sent] = await wired.outbox.send([SendText(CHAT, "draft")])
    [message_id] = sent.message_ids
    fake.fail_next("editMessageText", status=429, retry_after=1)
    edit = await wired.outbox.perform(EditText(CHAT, message_id, "final"))
    assert edit.queued
    fake.fail_next("deleteMessage", status=429, retry_after=1)
    delete = await wired.outbox.perform(DeleteMessage(CHAT, message_id))
    assert delete.queued  # behind the edit: a chat's changes are made in the order they were asked for
    await eventually(lambda: wired.store.pending() == [], "the edit and the deletion")
    [message] = fake.sent_messages(DM)
    assert message["text"] == "final" and message["deleted"] is True
    edits, deletes = fake.calls_to("editMessageText"), fake.calls_to("deleteMessage")
    assert [c.status for c in edits] == [429, 200] and [c.status for c in deletes] == [429, 200]
    assert edits[1].ts - edits[0].ts >= 0.9 and edits[1].ts <= deletes[1].ts


async def test_typing_and_reactions_are_sent_once_and_never_retried(fake: FakeTelegram, wired: Wired) -> None:
    [sent] = await wired.outbox.send([SendText(CHAT, "hello")])
    fake.fail_next("*", status=429, retry_after=1, times=10)
    react = await wired.outbox.perform(React(CHAT, sent.message_ids[0], "👍"))
    typing = await wired.outbox.perform(Typing(CHAT))
    assert not react.ok and not react.queued and not typing.ok and not typing.queued
    assert wired.store.pending() == []
    await quiet_for(1.5, "past Telegram's wait: a retry of either would have been made by now")
    assert len(fake.calls_to("setMessageReaction")) == 1 and len(fake.calls_to("sendChatAction")) == 1


async def test_a_status_text_is_sent_at_once_or_not_at_all(fake: FakeTelegram, wired: Wired) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=1)
    result = await wired.outbox.perform(SendText(CHAT, "Still working on it…", purpose="status"))
    assert not result.ok and not result.queued and wired.store.pending() == []
    await quiet_for(1.5, "past Telegram's wait: a status text kept for later would have been sent by now")
    assert fake.sent_messages(DM) == [] and len(_sends(fake)) == 1


async def test_a_notice_refused_for_now_arrives_after_the_wait_and_is_kept_as_a_notice(
    fake: FakeTelegram, wired: Wired
) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=1)
    [result] = await wired.outbox.send([SendText(CHAT, "This is a private assistant.", purpose="notice")])
    assert result.queued
    await eventually(lambda: wired.store.pending() == [], "the notice")
    [notice] = fake.sent_messages(DM)
    assert wired.messages.is_notice(CHAT, str(notice["message_id"]))
    assert wired.messages.recent(CHAT) == []  # out of every history a model reads
