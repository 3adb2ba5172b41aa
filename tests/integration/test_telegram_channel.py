"""TelegramChannel against the fake Bot API over real HTTP."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from bicameral.app import telegram_config
from bicameral.channels.telegram import TelegramChannel
from bicameral.channels.telegram.actions import IN_FLIGHT
from bicameral.config import Settings
from bicameral.errors import ChannelStartError
from bicameral.events import (
    DeleteMessage,
    EditText,
    Inbound,
    React,
    SendFile,
    SendText,
    Typing,
)
from bicameral.folders import MAX_NAME_CHARS, safe_name
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually, quiet_for

DM = 4242
GROUP = -1001234
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (64).to_bytes(4, "big") + (48).to_bytes(4, "big") + b"rest-of-png"


class SleepRecorder:
    """An injectable sleep that records requested delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0.01)  # still yield, so a retry loop cannot spin hot


class Inbox:
    """A sink that records every batch it accepts."""

    def __init__(self) -> None:
        self.batches: list[list[Inbound]] = []

    async def __call__(self, batch: Sequence[Inbound]) -> None:
        self.batches.append(list(batch))

    @property
    def items(self) -> list[Inbound]:
        return [inbound for batch in self.batches for inbound in batch]

    async def wait(self, count: int = 1, timeout: float = 10.0) -> list[Inbound]:
        await eventually(lambda: len(self.items) >= count, lambda: f"{count} inbound(s); got {self.items}", timeout=timeout)
        return self.items


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(bot_username="bicameral_test_bot").start()
    yield server
    server.stop()
    assert server.errors == []  # the fake itself must never have crashed on our requests


@pytest.fixture
def settings(tmp_path: Path, fake: FakeTelegram) -> Settings:
    return Settings.for_test(
        tmp_path, telegram_token=fake.token, telegram_api_url=fake.url, telegram_poll_timeout=1
    )


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
async def channel(settings: Settings, sleeps: SleepRecorder):
    ch = TelegramChannel(telegram_config(settings), sleep=sleeps)
    yield ch
    await ch.stop()


@pytest.fixture
def ended() -> list[str | None]:
    """What the channel reported through `on_end`, in order."""
    return []


@pytest.fixture
async def inbox(channel: TelegramChannel, ended: list[str | None]) -> Inbox:
    sink = Inbox()
    await channel.start(sink, ended.append)
    return sink


# --- receiving ---


async def test_dm_arrives_addressed(fake: FakeTelegram, inbox: Inbox) -> None:
    fake.user_sends(DM, "hello there", first_name="Alice", username="alice")
    [msg] = await inbox.wait()
    assert msg.channel == "telegram"
    assert msg.chat == f"telegram:{DM}"
    assert msg.text == "hello there"
    assert msg.addressed is True
    assert msg.chat_type == "private"
    assert msg.sender.name == "Alice" and msg.sender.username == "alice" and msg.sender.id == str(DM)
    assert msg.kind == "message"
    assert msg.update_id is not None


async def test_group_addressing(fake: FakeTelegram, channel: TelegramChannel, inbox: Inbox) -> None:
    sent = await channel.perform(SendText(f"telegram:{GROUP}", "I am here"))
    assert sent.ok
    bot_msg_id = int(sent.message_ids[0])

    fake.user_sends(GROUP, "just chatting", chat_type="supergroup", chat_title="Team")
    fake.user_sends(GROUP, "hey @Bicameral_Test_Bot what's up", chat_type="supergroup")
    fake.user_sends(GROUP, "agreed", chat_type="supergroup", reply_to_message_id=bot_msg_id)
    fake.user_sends(GROUP, "Bicameral, what time is it?", chat_type="supergroup")
    fake.user_sends(GROUP, "bicameralism is a theory", chat_type="supergroup")
    fake.user_sends(GROUP, "/help@some_other_bot", chat_type="supergroup")
    fake.user_sends(GROUP, "/help", chat_type="supergroup")
    items = await inbox.wait(7)

    assert [m.addressed for m in items] == [False, True, True, True, False, False, True]
    assert items[0].chat_type == "supergroup" and items[0].chat_title == "Team"
    reply = items[2].reply_to
    assert reply is not None and reply.from_bot and reply.text == "I am here"


async def test_edit_arrives_as_edit(fake: FakeTelegram, inbox: Inbox) -> None:
    original = fake.user_sends(DM, "frist")
    fake.user_edits(DM, original["message_id"], "first")
    first, edit = await inbox.wait(2)
    assert first.kind == "message"
    assert edit.kind == "edit"
    assert edit.message_id == first.message_id == str(original["message_id"])
    assert edit.text == "first"


async def test_reply_carries_quoted_referent(fake: FakeTelegram, inbox: Inbox) -> None:
    original = fake.user_sends(DM, "the plan is X", first_name="Alice")
    fake.user_sends(DM, "what about this?", reply_to_message_id=original["message_id"])
    _, reply = await inbox.wait(2)
    assert reply.reply_to is not None
    assert reply.reply_to.message_id == str(original["message_id"])
    assert reply.reply_to.text == "the plan is X"
    assert reply.reply_to.sender_name == "Alice"
    assert reply.reply_to.from_bot is False


async def test_files_arrive_as_references_and_are_fetched_on_request(
    fake: FakeTelegram, channel: TelegramChannel, inbox: Inbox
) -> None:
    fake.user_sends(DM, document=("report.pdf", b"%PDF-1.4 body"), caption="read this")
    [msg] = await inbox.wait()
    assert msg.attachments == ()
    [ref] = msg.attachment_refs
    assert (ref.kind, ref.name, ref.size, ref.mime) == ("document", "report.pdf", 13, "application/pdf")
    assert fake.calls_to("getFile") == [] and fake.calls_to("downloadFile") == []  # nothing fetched at intake

    fetched = await channel.fetch_attachments(msg)
    assert fetched.attachment_refs == ()
    [attachment] = fetched.attachments
    assert (attachment.kind, attachment.size) == ("document", 13)
    assert fetched.text == "read this"


async def test_photo_with_caption_is_one_inbound(
    fake: FakeTelegram, channel: TelegramChannel, inbox: Inbox, settings: Settings
) -> None:
    fake.user_sends(DM, photo=PNG, caption="look at this")
    [msg] = await inbox.wait()
    await quiet_for(0.3, "a second inbound for the photo or its caption would have arrived by now")
    assert len(inbox.items) == 1
    msg = await channel.fetch_attachments(msg)
    assert msg.text == "look at this"
    [attachment] = msg.attachments
    assert attachment.kind == "photo"
    saved = settings.data_dir / attachment.path
    assert saved.read_bytes() == PNG
    assert saved.resolve().is_relative_to((settings.attachments_dir / str(DM)).resolve())
    assert saved.name.startswith(f"{msg.message_id}-")


async def test_document_name_cannot_escape_attachments_dir(
    fake: FakeTelegram, channel: TelegramChannel, inbox: Inbox, settings: Settings
) -> None:
    fake.user_sends(DM, document=("../../etc/passwd", b"root:x:0:0"))
    [msg] = await inbox.wait()
    msg = await channel.fetch_attachments(msg)
    [attachment] = msg.attachments
    saved = (settings.data_dir / attachment.path).resolve()
    assert saved.is_relative_to(settings.attachments_dir.resolve())
    assert saved.read_bytes() == b"root:x:0:0"
    assert saved.name == f"{msg.message_id}-passwd"
    assert msg.text == ""


def test_safe_name_rules() -> None:
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("..\\..\\boot.ini") == "boot.ini"
    assert safe_name("..") == "file"
    assert safe_name(".bashrc") == "bashrc"
    assert safe_name("my report (final).pdf") == "my_report__final_.pdf"
    long = safe_name("x" * 200 + ".pdf")
    assert len(long) == MAX_NAME_CHARS and long.endswith(".pdf")


async def test_failed_download_becomes_marker(fake: FakeTelegram, channel: TelegramChannel, inbox: Inbox) -> None:
    fake.fail_next("getFile", status=500, description="Internal Server Error")
    fake.user_sends(DM, document=("notes.txt", b"hi"), caption="my notes")
    [msg] = await inbox.wait()
    msg = await channel.fetch_attachments(msg)
    assert msg.attachments == ()
    assert msg.text == "my notes\n[attachment unavailable: notes.txt]"


async def test_malformed_update_is_skipped_and_acknowledged(
    fake: FakeTelegram, inbox: Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    bad_id = fake.push_raw_update({"update_id": 5, "message": {"text": 3}})
    fake.user_sends(DM, "still here")
    [msg] = await inbox.wait()
    assert msg.text == "still here"
    assert any(f"skipping malformed update {bad_id}" in r.getMessage() for r in caplog.records)
    await eventually(lambda: fake.acked_offset > msg.update_id, what="offset past both updates")
    assert msg.update_id > bad_id


async def test_stickers_and_joins_are_ignored(fake: FakeTelegram, inbox: Inbox) -> None:
    fake.push_raw_update(
        {
            "message": {
                "message_id": 900,
                "date": 1,
                "chat": {"id": DM, "type": "private", "first_name": "A"},
                "from": {"id": DM, "is_bot": False, "first_name": "A"},
                "sticker": {
                    "file_id": "s",
                    "file_unique_id": "s",
                    "type": "regular",
                    "width": 1,
                    "height": 1,
                    "is_animated": False,
                    "is_video": False,
                },
            }
        }
    )
    fake.user_sends(DM, "after sticker")
    [msg] = await inbox.wait()
    assert msg.text == "after sticker"


async def test_offset_waits_for_the_sink(fake: FakeTelegram, channel: TelegramChannel) -> None:
    release = asyncio.Event()
    seen: list[Inbound] = []

    async def slow_sink(batch: Sequence[Inbound]) -> None:
        seen.extend(batch)
        await release.wait()

    await channel.start(slow_sink, lambda reason: None)
    fake.user_sends(DM, "persist me")
    await eventually(lambda: len(seen) == 1, what="sink called")
    update_id = seen[0].update_id
    assert update_id is not None
    await quiet_for(0.3, "an acknowledgement made while the sink holds the batch would have reached the fake by now")
    assert fake.acked_offset <= update_id  # not acknowledged while the sink holds it
    release.set()
    await eventually(lambda: fake.acked_offset == update_id + 1, what="acknowledgement after the sink")


async def test_failing_sink_gets_the_same_batch_again(
    fake: FakeTelegram, channel: TelegramChannel, sleeps: SleepRecorder
) -> None:
    calls: list[list[Inbound]] = []

    async def flaky_sink(batch: Sequence[Inbound]) -> None:
        calls.append(list(batch))
        if len(calls) == 1:
            raise RuntimeError("database is locked")

    await channel.start(flaky_sink, lambda reason: None)
    fake.user_sends(DM, "retry me")
    await eventually(lambda: len(calls) >= 2, what="redelivery")
    assert [m.message_id for m in calls[0]] == [m.message_id for m in calls[1]]
    assert calls[1][0].text == "retry me"
    assert 1.0 in sleeps.delays
    await eventually(lambda: fake.acked_offset == calls[1][0].update_id + 1, what="ack after success")


async def test_sink_failing_twice_keeps_the_offset_until_the_batch_is_stored(
    fake: FakeTelegram, channel: TelegramChannel, sleeps: SleepRecorder
) -> None:
    calls: list[list[Inbound]] = []
    acked_while_failing: list[int] = []

    async def full_disk_sink(batch: Sequence[Inbound]) -> None:
        calls.append(list(batch))
        if len(calls) <= 2:
            acked_while_failing.append(fake.acked_offset)
            raise OSError(28, "No space left on device")

    await channel.start(full_disk_sink, lambda reason: None)
    fake.user_sends(DM, "keep me")
    await eventually(lambda: len(calls) >= 3, what="the third attempt")
    update_id = calls[0][0].update_id
    assert update_id is not None
    assert [[m.text for m in batch] for batch in calls] == [["keep me"]] * 3
    assert all(offset <= update_id for offset in acked_while_failing)  # Telegram would still redeliver it
    assert sleeps.delays[:2] == [1.0, 2.0]  # backing off between attempts
    await eventually(lambda: fake.acked_offset == update_id + 1, what="acknowledgement once stored")


async def test_lone_surrogates_arrive_repaired(fake: FakeTelegram, inbox: Inbox) -> None:
    """Valid JSON can carry text that UTF-8 (and so SQLite) cannot store; it is repaired, not refused."""
    fake.push_raw_update(
        {
            "message": {
                "message_id": 901,
                "date": 1,
                "chat": {"id": DM, "type": "private", "first_name": "A\ud800"},
                "from": {"id": DM, "is_bot": False, "first_name": "A\ud800"},
                "text": "caf\udc00e \ud83d\ude00",
            }
        }
    )
    [msg] = await inbox.wait()
    assert msg.text == "caf\ufffde \U0001f600"  # the lone half replaced, the real pair kept
    assert msg.sender.name == "A\ufffd"
    msg.text.encode("utf-8")


async def test_server_errors_back_off_and_recover(
    fake: FakeTelegram, inbox: Inbox, sleeps: SleepRecorder
) -> None:
    fake.fail_next("getUpdates", status=502, description="Bad Gateway", times=2)
    fake.user_sends(DM, "after the outage")
    [msg] = await inbox.wait()
    assert msg.text == "after the outage"
    assert sleeps.delays[:2] == [1.0, 2.0]


async def test_idle_polling_rests_when_the_server_answers_at_once(fake: FakeTelegram, settings: Settings) -> None:
    """A Bot API that does not hold long polls must not make an idle bot ask again and again."""
    fake.answer_polls_at_once()
    channel = TelegramChannel(telegram_config(settings))  # real sleep: the pacing itself is under test
    inbox = Inbox()
    await channel.start(inbox, lambda reason: None)
    try:
        await eventually(lambda: len(fake.calls_to("getUpdates")) >= 1, what="the first poll")
        first = time.monotonic()
        await quiet_for(2.0, "a stretch of idle time to count polls over: a loop without a pause makes hundreds")
        polls = [c for c in fake.calls_to("getUpdates") if c.ts >= first]
        idle_seconds = time.monotonic() - first
        # About one poll a second; a loop without a pause makes hundreds here.
        assert len(polls) <= 2 * idle_seconds + 2, f"{len(polls)} polls in {idle_seconds:.1f} s"

        fake.user_sends(DM, "heard during the pause")
        [msg] = await inbox.wait()
        assert msg.text == "heard during the pause"
    finally:
        await channel.stop()


async def test_conflict_ends_the_channel_with_the_reason(
    fake: FakeTelegram, channel: TelegramChannel, inbox: Inbox, ended: list[str | None]
) -> None:
    fake.fail_next("getUpdates", status=409, description="Conflict: terminated by other getUpdates request")
    await eventually(lambda: bool(ended), what="the channel to report its end")
    assert not channel.polling
    assert len(ended) == 1 and ended[0] is not None and "409" in ended[0]


async def test_token_revoked_while_polling_ends_the_channel(
    fake: FakeTelegram, channel: TelegramChannel, inbox: Inbox, ended: list[str | None]
) -> None:
    fake.fail_next("getUpdates", status=401, description="Unauthorized")
    await eventually(lambda: bool(ended), what="the channel to report its end")
    assert not channel.polling
    assert ended == ["Telegram rejected the token: check BICAMERAL_TELEGRAM_TOKEN"]


async def test_updates_without_usable_ids_do_not_spin_the_loop(fake: FakeTelegram, settings: Settings) -> None:
    """A batch the offset cannot move past (no update_id) is asked for again, but at the idle pace."""
    fake.register_method("getUpdates", lambda params: [{"message": {"text": "no id"}}])
    channel = TelegramChannel(telegram_config(settings))  # real sleep: the pacing itself is under test
    inbox = Inbox()
    await channel.start(inbox, lambda reason: None)
    try:
        await eventually(lambda: len(fake.calls_to("getUpdates")) >= 1, what="the first poll")
        first = time.monotonic()
        await quiet_for(1.5, "a stretch of time to count polls over: a loop without a pause makes hundreds")
        polls = [c for c in fake.calls_to("getUpdates") if c.ts >= first]
        assert len(polls) <= 2 * (time.monotonic() - first) + 2
        assert inbox.items == []
    finally:
        await channel.stop()


async def test_bad_token_fails_clearly(tmp_path: Path, fake: FakeTelegram) -> None:
    settings = Settings.for_test(tmp_path, telegram_token="999:WRONG", telegram_api_url=fake.url)
    ch = TelegramChannel(telegram_config(settings))
    try:
        with pytest.raises(ChannelStartError, match="check BICAMERAL_TELEGRAM_TOKEN"):
            await ch.start(Inbox(), lambda reason: None)
    finally:
        await ch.stop()


# --- performing actions ---


async def test_long_text_is_split(fake: FakeTelegram, channel: TelegramChannel) -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor " * 20 for i in range(28))
    assert len(text) >= 10_000
    result = await channel.perform(SendText(f"telegram:{DM}", text, reply_to=None))
    assert result.ok, result.error
    sent = fake.sent_messages(DM)
    assert len(sent) >= 3
    assert all(len(m["text"]) <= 4096 for m in sent)
    assert list(result.message_ids) == [str(m["message_id"]) for m in sent]
    assert "Paragraph 0" in sent[0]["text"] and "Paragraph 27" in sent[-1]["text"]


async def test_reply_parameters_only_on_first_chunk(fake: FakeTelegram, channel: TelegramChannel) -> None:
    user_msg = fake.user_sends(DM, "question")
    text = "\n\n".join("answer " * 100 for _ in range(15))
    result = await channel.perform(SendText(f"telegram:{DM}", text, reply_to=str(user_msg["message_id"])))
    assert result.ok, result.error
    sent = fake.sent_messages(DM)
    assert sent[0]["reply_to_message"]["message_id"] == user_msg["message_id"]
    assert all("reply_to_message" not in m for m in sent[1:])


async def test_markdown_is_sent_as_html(fake: FakeTelegram, channel: TelegramChannel) -> None:
    result = await channel.perform(SendText(f"telegram:{DM}", "**hi**"))
    assert result.ok, result.error
    [sent] = fake.sent_messages(DM)
    assert sent["params"]["parse_mode"] == "HTML"
    assert "<b>hi</b>" in sent["params"]["text"]
    assert sent["text"] == "hi"
    assert sent["entities"][0]["type"] == "bold"


async def test_entity_rejection_falls_back_to_plain(fake: FakeTelegram, channel: TelegramChannel) -> None:
    fake.reject_entities_next()
    result = await channel.perform(SendText(f"telegram:{DM}", "**hi** there"))
    assert result.ok, result.error
    [sent] = fake.sent_messages(DM)
    assert "parse_mode" not in sent["params"]
    assert sent["text"] == "hi there"
    assert len(fake.calls_to("sendMessage")) == 2


@pytest.mark.parametrize(
    "action",
    [
        SendText(f"telegram:{DM}", "patience"),
        EditText(f"telegram:{DM}", "1", "patience"),
        DeleteMessage(f"telegram:{DM}", "1"),
        React(f"telegram:{DM}", "1", "👍"),
        Typing(f"telegram:{DM}"),
    ],
)
async def test_a_429_is_reported_with_its_wait_and_never_waited_out_here(
    fake: FakeTelegram, channel: TelegramChannel, sleeps: SleepRecorder, action: SendText
) -> None:
    # The outbox is the one place that waits; the channel says how long and returns.
    fake.fail_next("*", status=429, retry_after=120, times=10)
    result = await channel.perform(action)
    assert not result.ok and "rate limit" in (result.error or "") and result.retry_after == 120.0
    assert len([c for c in fake.calls if c.method not in ("getMe", "getUpdates")]) == 1
    assert sleeps.delays == []


LONG = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 40 for i in range(6))


async def test_a_429_between_two_parts_reports_the_part_that_arrived_and_the_retry_sends_only_the_rest(
    fake: FakeTelegram, channel: TelegramChannel
) -> None:
    fake.user_sends(DM, "write a lot")
    asked = SendText(f"telegram:{DM}", LONG, reply_to="1")
    fake.fail_next("sendMessage", status=429, retry_after=2, after=1)
    first = await channel.perform(asked)
    assert not first.ok and first.retry_after == 2.0 and len(first.message_ids) == 1

    again = await channel.perform(replace(asked, sent_parts=first.message_ids))
    assert again.ok and again.message_ids[0] == first.message_ids[0] and len(again.message_ids) >= 2
    sent = fake.sent_messages(DM)
    assert [str(m["message_id"]) for m in sent] == list(again.message_ids)  # every part once, in order
    assert " ".join(m["text"] for m in sent).split() == LONG.split()
    replies = [c.params.get("reply_parameters") for c in fake.calls_to("sendMessage")]
    assert replies[0] and not any(replies[1:])  # only the first part quotes; the resumed rest follows it


async def test_react_typing_edit_delete(fake: FakeTelegram, channel: TelegramChannel) -> None:
    chat = f"telegram:{DM}"
    sent = await channel.perform(SendText(chat, "draft"))
    [mid] = sent.message_ids

    assert (await channel.perform(EditText(chat, mid, "final *answer*"))).ok
    assert (await channel.perform(EditText(chat, mid, "final *answer*"))).ok  # not modified is fine
    assert fake.message(DM, int(mid))["text"] == "final answer"

    assert (await channel.perform(React(chat, mid, "👍"))).ok
    assert fake.reactions(DM)[0]["reaction"] == [{"type": "emoji", "emoji": "👍"}]

    assert (await channel.perform(Typing(chat))).ok
    assert fake.chat_actions(DM)[0].params["action"] == "typing"

    assert (await channel.perform(DeleteMessage(chat, mid))).ok
    assert fake.sent_messages(DM)[0]["deleted"] is True


async def test_typing_is_not_repeated_while_it_still_shows(fake: FakeTelegram, settings: Settings) -> None:
    now = [1000.0]
    channel = TelegramChannel(telegram_config(settings), sleep=SleepRecorder(), clock=lambda: now[0])
    chat = f"telegram:{DM}"
    try:
        assert (await channel.perform(Typing(chat))).ok
        assert (await channel.perform(Typing(chat))).ok  # back to back: still showing, nothing sent
        assert len(fake.chat_actions(DM)) == 1
        assert (await channel.perform(SendText(chat, "here you go"))).ok  # a message ends the indicator
        assert (await channel.perform(Typing(chat))).ok
        assert len(fake.chat_actions(DM)) == 2
        now[0] += settings.typing_interval_seconds  # the refresh the turn sends once per interval
        assert (await channel.perform(Typing(chat))).ok
        assert len(fake.chat_actions(DM)) == 3
    finally:
        await channel.stop()


async def test_a_burst_of_calls_queues_in_order_and_typing_gives_way(fake: FakeTelegram, channel: TelegramChannel) -> None:
    chats = [DM + i for i in range(IN_FLIGHT + 4)]
    releases = [fake.hold("sendMessage", chat) for chat in chats]
    sends = [asyncio.create_task(channel.perform(SendText(f"telegram:{chat}", f"hi {chat}"))) for chat in chats]
    try:
        await eventually(lambda: len(fake.calls_to("sendMessage")) >= IN_FLIGHT, what=f"{IN_FLIGHT} calls in flight")
        # Every slot is busy: a typing indicator is cosmetic, so it is skipped rather than queued.
        assert (await channel.perform(Typing(f"telegram:{GROUP}"))).ok
        assert fake.chat_actions(GROUP) == []
        assert len(fake.calls_to("sendMessage")) == IN_FLIGHT  # the rest wait their turn in the channel
    finally:
        for release in releases:
            release.set()
    results = await asyncio.gather(*sends)
    assert all(result.ok for result in results)
    assert {m["chat"]["id"] for chat in chats for m in fake.sent_messages(chat)} == set(chats)


async def test_platform_errors_are_results_not_exceptions(fake: FakeTelegram, channel: TelegramChannel) -> None:
    result = await channel.perform(React(f"telegram:{DM}", "999", "👍"))
    assert not result.ok and "message_id_invalid" in (result.error or "").lower()
    result = await channel.perform(SendText("telegram:not-a-number", "x"))
    assert not result.ok and "chat id" in (result.error or "")
    fake.fail_next("sendMessage", status=403, description="Forbidden: bot was blocked by the user")
    result = await channel.perform(SendText(f"telegram:{DM}", "hello?"))
    assert not result.ok and "blocked" in (result.error or "")


@pytest.mark.parametrize("answer", [{"text": "sent, but no id"}, {"message_id": "7"}, {"message_id": True}, True, None])
async def test_an_answer_without_a_message_id_fails_the_send(
    fake: FakeTelegram, channel: TelegramChannel, answer: object
) -> None:
    fake.register_method("sendMessage", lambda params: answer)
    result = await channel.perform(SendText(f"telegram:{DM}", "hello"))
    assert not result.ok and result.retry_after is None  # it may have arrived: sending again could repeat it
    assert result.error == "Telegram SendText failed: sendMessage answered without a message id"


@pytest.mark.parametrize("started", [False, True])
async def test_a_refused_token_on_a_send_reads_as_telegram_said(
    fake: FakeTelegram, channel: TelegramChannel, started: bool
) -> None:
    if started:
        await channel.start(Inbox(), lambda reason: None)
    fake.fail_next("sendMessage", status=401, description="Unauthorized")
    result = await channel.perform(SendText(f"telegram:{DM}", "hello"))
    assert (result.ok, result.error, result.retry_after) == (False, "Telegram SendText failed: Unauthorized", None)


async def test_send_file_inside_data_dir(fake: FakeTelegram, channel: TelegramChannel, settings: Settings) -> None:
    (settings.data_dir / "out").mkdir(parents=True)
    (settings.data_dir / "out" / "report.txt").write_bytes(b"the report")
    result = await channel.perform(SendFile(f"telegram:{DM}", "out/report.txt", caption="**done**"))
    assert result.ok, result.error
    [sent] = fake.sent_messages(DM)
    assert sent["method"] == "sendDocument"
    assert sent["file_bytes"] == b"the report"
    assert sent["caption"] == "done"


async def test_send_file_outside_data_dir_fails(
    fake: FakeTelegram, channel: TelegramChannel, settings: Settings, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("nope")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    for path in ("../secret.txt", str(secret), "../../etc/passwd"):
        result = await channel.perform(SendFile(f"telegram:{DM}", path))
        assert not result.ok
        assert result.error == "path outside data dir"
    assert fake.calls_to("sendDocument") == []
