"""Self-tests for the fake Telegram Bot API server, driven by the real python-telegram-bot client."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import httpx
import pytest
from telegram import Bot, BotCommand, InputFile, Message, ReactionTypeEmoji, ReplyParameters, Update
from telegram.error import BadRequest, Conflict, InvalidToken, NetworkError, RetryAfter
from telegram.ext import Application, CommandHandler, ContextTypes, MessageHandler, filters
from telegram.request import HTTPXRequest

from tests.fakes.telegram_server import FakeTelegram, parse_html
from tests.support.chat import eventually, quiet_for

CHAT = 4242


def _png(width: int, height: int) -> bytes:
    """Minimal PNG header bytes, enough for the fake to read dimensions."""
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", width, height) + b"\x00" * 16


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram().start()
    try:
        yield server
    finally:
        server.stop()


def _bot_for(fake: FakeTelegram, token: str | None = None) -> Bot:
    """A real PTB Bot pointed at the fake; two getUpdates may be in flight at once (the 409 test)."""
    return Bot(
        token or fake.token,
        base_url=f"{fake.url}/bot",
        base_file_url=f"{fake.url}/file/bot",
        get_updates_request=HTTPXRequest(connection_pool_size=2),
    )


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    client = _bot_for(fake)
    await client.initialize()
    try:
        yield client
    finally:
        await client.shutdown()


async def _download(bot: Bot, file_id: str) -> bytes:
    return bytes(await (await bot.get_file(file_id)).download_as_bytearray())


# --------------------------------------------------------------------------- basics


async def test_get_me(fake: FakeTelegram, bot: Bot) -> None:
    me = await bot.get_me()
    assert me.id == 123456 and me.is_bot and me.username == "bicameral_test_bot"
    assert me.can_join_groups is True and me.supports_inline_queries is False
    assert fake.calls[-1].method == "getMe" and fake.calls[-1].status == 200


async def test_wrong_token_is_unauthorized(fake: FakeTelegram) -> None:
    wrong = _bot_for(fake, token="999:WRONG")
    try:
        with pytest.raises(InvalidToken, match="rejected"):
            await wrong.initialize()
    finally:
        await wrong.shutdown()


async def test_unknown_method_and_raw_wire_format(fake: FakeTelegram) -> None:
    async with httpx.AsyncClient(base_url=f"{fake.url}/bot{fake.token}") as client:
        resp = await client.post("/frobnicate")
        assert resp.status_code == 404
        assert resp.json() == {"ok": False, "error_code": 404, "description": "Not Found: method not found"}
        # JSON bodies and GET query params are accepted too.
        resp = await client.post("/sendMessage", json={"chat_id": CHAT, "text": "json"})
        assert resp.status_code == 200 and resp.json()["result"]["text"] == "json"
        resp = await client.get("/sendMessage", params={"chat_id": CHAT, "text": "query"})
        assert resp.json()["ok"] is True
        resp = await client.post("/sendMessage", data={"chat_id": CHAT, "text": ""})
        assert resp.status_code == 400
        assert resp.json()["description"] == "Bad Request: message text is empty"
    assert [m["text"] for m in fake.sent_messages(CHAT)] == ["json", "query"]


async def test_missing_file_download_is_404(fake: FakeTelegram) -> None:
    async with httpx.AsyncClient() as client:
        resp = await client.get(f"{fake.url}/file/bot{fake.token}/nope/missing.bin")
    assert resp.status_code == 404


# --------------------------------------------------------------------------- getUpdates


async def test_get_updates_offset_semantics(fake: FakeTelegram, bot: Bot) -> None:
    ids = [fake.user_sends(CHAT, f"m{i}")["message_id"] for i in range(3)]
    assert ids == [1, 2, 3]
    updates = await bot.get_updates()
    assert [u.message.text for u in updates if u.message] == ["m0", "m1", "m2"]
    uids = [u.update_id for u in updates]
    assert uids == sorted(uids) and fake.pending_updates == 3

    # Without a new offset nothing is confirmed: the same updates come back.
    assert [u.update_id for u in await bot.get_updates(limit=2)] == uids[:2]

    # offset=uids[1] confirms uids[0] forever.
    again = await bot.get_updates(offset=uids[1])
    assert [u.update_id for u in again] == uids[1:]
    assert fake.acked_offset == uids[1] and fake.pending_updates == 2

    assert await bot.get_updates(offset=uids[-1] + 1) == ()
    assert fake.pending_updates == 0 and fake.acked_offset == uids[-1] + 1
    # Going back to an older offset cannot resurrect confirmed updates.
    assert await bot.get_updates(offset=uids[0]) == ()


async def test_long_poll_wakes_early_from_another_thread(fake: FakeTelegram, bot: Bot) -> None:
    started = time.monotonic()
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await quiet_for(0.3, "with nothing to deliver, a poll answered early would be done by now")
    assert not poll.done()
    threading.Timer(0.1, lambda: fake.user_sends(CHAT, "wake up")).start()
    updates = await asyncio.wait_for(poll, 5)
    assert time.monotonic() - started < 3
    assert [u.message.text for u in updates if u.message] == ["wake up"]


async def test_long_poll_times_out_empty(fake: FakeTelegram, bot: Bot) -> None:
    started = time.monotonic()
    assert await bot.get_updates(timeout=1) == ()
    assert 0.9 <= time.monotonic() - started < 3


async def test_newer_get_updates_terminates_older_poll(fake: FakeTelegram, bot: Bot) -> None:
    polls = len(fake.calls_to("getUpdates"))
    first = asyncio.create_task(bot.get_updates(timeout=10))
    await eventually(lambda: len(fake.calls_to("getUpdates")) > polls, "the first poll to reach the fake")
    second = asyncio.create_task(bot.get_updates(timeout=1))
    with pytest.raises(Conflict):
        await asyncio.wait_for(first, 5)
    assert await second == ()


async def test_edited_and_raw_updates(fake: FakeTelegram, bot: Bot) -> None:
    sent = fake.user_sends(CHAT, "typo")
    edited = fake.user_edits(CHAT, sent["message_id"], "fixed")
    assert edited["text"] == "fixed" and "edit_date" in edited
    raw_id = fake.push_raw_update({"weird": True})
    async with httpx.AsyncClient() as client:
        resp = await client.get(f"{fake.url}/bot{fake.token}/getUpdates")
    result = resp.json()["result"]
    assert result[0]["message"]["text"] == "typo"
    assert result[1]["edited_message"]["text"] == "fixed"
    assert result[2] == {"weird": True, "update_id": raw_id}
    # An explicit update_id is kept, and later ids continue above it.
    assert fake.push_raw_update({"update_id": raw_id + 10}) == raw_id + 10
    fake.user_sends(CHAT, "next")
    async with httpx.AsyncClient() as client:
        resp = await client.post(f"{fake.url}/bot{fake.token}/getUpdates", data={"offset": str(raw_id + 11)})
    assert [u["message"]["text"] for u in resp.json()["result"]] == ["next"]
    assert fake.pending_updates == 1


async def test_drop_pending_updates_and_webhook_info(fake: FakeTelegram, bot: Bot) -> None:
    fake.user_sends(CHAT, "stale")
    info = await bot.get_webhook_info()
    assert info.url == "" and info.pending_update_count == 1
    assert await bot.delete_webhook(drop_pending_updates=True) is True
    assert fake.pending_updates == 0


# --------------------------------------------------------------------------- sending


async def test_send_message_html_and_observation(fake: FakeTelegram, bot: Bot) -> None:
    msg = await bot.send_message(CHAT, "<b>Hi</b> &lt;you&gt; <a href='https://x.y'>link</a>", parse_mode="HTML")
    assert msg.text == "Hi <you> link"
    assert msg.from_user is not None and msg.from_user.id == 123456
    assert [(e.type, e.offset, e.length) for e in msg.entities] == [("bold", 0, 2), ("text_link", 9, 4)]
    sent = fake.wait_for_sent(CHAT)
    assert sent[0]["params"]["parse_mode"] == "HTML"
    assert sent[0]["params"]["text"].startswith("<b>Hi</b>")
    assert sent[0]["message_id"] == msg.message_id and sent[0]["deleted"] is False


async def test_message_thread_id(fake: FakeTelegram, bot: Bot) -> None:
    fake.user_sends(-1001, "in topic", chat_type="supergroup", chat_title="G", message_thread_id=7, user_id=5)
    msg = await bot.send_message(-1001, "topic reply", message_thread_id=7)
    assert msg.message_thread_id == 7 and msg.chat.type == "supergroup" and msg.chat.title == "G"


async def test_send_message_validation(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(CHAT, "x" * 4097)
    await bot.send_message(CHAT, "x" * 4096)
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities: Unsupported start tag \"br\""):
        await bot.send_message(CHAT, "a<br>b", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities: Can't find end tag"):
        await bot.send_message(CHAT, "<b>open", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities: Unexpected end tag"):
        await bot.send_message(CHAT, "close</i>", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(CHAT, "<b></b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r"(?i)reserved"):
        await bot.send_message(CHAT, "1.5", parse_mode="MarkdownV2")
    assert (await bot.send_message(CHAT, "1\\.5 *bold*", parse_mode="MarkdownV2")).text == "1.5 bold"
    assert len(fake.sent_messages(CHAT)) == 2


def test_parse_html_pre_language_and_utf16_offsets() -> None:
    text, entities = parse_html('😀 <pre><code class="language-py">x = 1</code></pre>')
    assert text == "😀 x = 1"
    assert entities == [{"type": "pre", "offset": 3, "length": 5, "language": "py"}]


async def test_reply_both_directions(fake: FakeTelegram, bot: Bot) -> None:
    user_msg = fake.user_sends(CHAT, "question")
    answer = await bot.send_message(CHAT, "answer", reply_parameters=ReplyParameters(message_id=user_msg["message_id"]))
    assert answer.reply_to_message is not None and answer.reply_to_message.text == "question"
    legacy = await bot.send_message(CHAT, "legacy", reply_to_message_id=user_msg["message_id"])
    assert legacy.reply_to_message is not None

    follow_up = fake.user_sends(CHAT, "follow-up", reply_to_message_id=answer.message_id)
    assert follow_up["reply_to_message"]["text"] == "answer"
    assert follow_up["reply_to_message"]["from"]["is_bot"] is True
    assert "reply_to_message" not in follow_up["reply_to_message"]  # nested one level only

    with pytest.raises(BadRequest, match=r"(?i)message to be replied not found"):
        await bot.send_message(CHAT, "x", reply_parameters=ReplyParameters(message_id=999))
    ok = await bot.send_message(
        CHAT, "x", reply_parameters=ReplyParameters(message_id=999, allow_sending_without_reply=True)
    )
    assert ok.reply_to_message is None


async def test_edit_and_delete(fake: FakeTelegram, bot: Bot) -> None:
    msg = await bot.send_message(CHAT, "draft")
    edited = await bot.edit_message_text("<i>final</i>", chat_id=CHAT, message_id=msg.message_id, parse_mode="HTML")
    assert isinstance(edited, Message) and edited.text == "final" and edited.edit_date is not None
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("<i>final</i>", chat_id=CHAT, message_id=msg.message_id, parse_mode="HTML")
    record = fake.sent_messages(CHAT)[0]
    assert record["text"] == "final" and record["edits"] == ["final"]

    user_msg = fake.user_sends(CHAT, "mine")
    with pytest.raises(BadRequest, match=r"(?i)message can't be edited"):
        await bot.edit_message_text("hijack", chat_id=CHAT, message_id=user_msg["message_id"])

    assert await bot.delete_message(CHAT, msg.message_id) is True
    assert fake.sent_messages(CHAT)[0]["deleted"] is True
    with pytest.raises(BadRequest, match=r"(?i)message to delete not found"):
        await bot.delete_message(CHAT, msg.message_id)
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("late", chat_id=CHAT, message_id=msg.message_id)


async def test_reactions_and_chat_actions(fake: FakeTelegram, bot: Bot) -> None:
    user_msg = fake.user_sends(CHAT, "hello")
    assert await bot.set_message_reaction(CHAT, user_msg["message_id"], [ReactionTypeEmoji(emoji="👍")])
    with pytest.raises(BadRequest, match=r"(?i)REACTION_INVALID"):
        await bot.set_message_reaction(CHAT, user_msg["message_id"], [ReactionTypeEmoji(emoji="🦖")])
    assert await bot.set_message_reaction(CHAT, user_msg["message_id"], [])  # clearing is allowed
    reactions = fake.reactions(CHAT)
    assert [r["reaction"] for r in reactions] == [[{"type": "emoji", "emoji": "👍"}], []]
    assert reactions[0]["message_id"] == user_msg["message_id"]

    assert await bot.send_chat_action(CHAT, "typing") is True
    with pytest.raises(BadRequest, match=r"(?i)wrong parameter action"):
        await bot.send_chat_action(CHAT, "dancing")
    assert [c.params["action"] for c in fake.chat_actions(CHAT)] == ["typing", "dancing"]
    assert fake.chat_actions(CHAT + 1) == []


# --------------------------------------------------------------------------- files


async def test_send_photo_and_document_then_download(fake: FakeTelegram, bot: Bot) -> None:
    png = _png(320, 200)
    photo_msg = await bot.send_photo(CHAT, InputFile(png, filename="pic.png"), caption="<b>look</b>", parse_mode="HTML")
    assert photo_msg.photo and (photo_msg.photo[-1].width, photo_msg.photo[-1].height) == (320, 200)
    assert photo_msg.caption == "look"
    assert await _download(bot, photo_msg.photo[-1].file_id) == png

    doc_msg = await bot.send_document(CHAT, InputFile(b"col\n1\n", filename="data.csv"), caption="report")
    assert doc_msg.document is not None and doc_msg.document.file_name == "data.csv"
    assert doc_msg.document.mime_type == "text/csv"
    file = await bot.get_file(doc_msg.document.file_id)
    assert file.file_path and file.file_size == 6
    assert await file.download_as_bytearray() == b"col\n1\n"

    # Re-sending by file_id works like Telegram.
    again = await bot.send_document(CHAT, doc_msg.document.file_id)
    assert again.document is not None and again.document.file_id == doc_msg.document.file_id

    sent = fake.sent_messages(CHAT)
    assert [m["method"] for m in sent] == ["sendPhoto", "sendDocument", "sendDocument"]
    assert sent[0]["file_bytes"] == png and sent[1]["file_bytes"] == b"col\n1\n"
    with pytest.raises(BadRequest, match=r"(?i)invalid file_id"):
        await bot.get_file("nope")


async def test_user_photo_and_document_downloadable(fake: FakeTelegram, bot: Bot) -> None:
    png = _png(64, 64)
    fake.user_sends(CHAT, photo=png, caption="see this")
    fake.user_sends(CHAT, document=("notes.txt", b"hello"))
    photo_update, doc_update = await bot.get_updates()
    assert photo_update.message is not None and photo_update.message.caption == "see this"
    assert photo_update.message.photo
    assert await _download(bot, photo_update.message.photo[-1].file_id) == png
    document = doc_update.message.document  # type: ignore[union-attr]
    assert document is not None and document.file_name == "notes.txt" and document.mime_type == "text/plain"
    assert await _download(bot, document.file_id) == b"hello"
    assert fake.file_bytes(document.file_id) == b"hello"


# --------------------------------------------------------------------------- scripted failures


async def test_retry_after_surfaces_as_telegram_retry_after(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next("sendMessage", retry_after=3, times=2)
    for _ in range(2):
        with pytest.raises(RetryAfter) as excinfo:
            await bot.send_message(CHAT, "hi")
        assert excinfo.value.retry_after in (3, timedelta(seconds=3))
    await bot.send_message(CHAT, "hi")
    statuses = [c.status for c in fake.calls_to("sendMessage")]
    assert statuses == [429, 429, 200]
    assert fake.calls_to("sendMessage")[0].response == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 3",
        "parameters": {"retry_after": 3},
    }

    fake.fail_next("getMe", status=500)
    with pytest.raises(NetworkError, match="Internal Server Error"):
        await bot.get_me()
    fake.fail_next("*", status=404, description="Not Found")
    with pytest.raises(InvalidToken):  # PTB reads a 404 as a token Telegram does not know
        await bot.send_chat_action(CHAT, "typing")


async def test_entity_rejection_then_plain_text_fallback(fake: FakeTelegram, bot: Bot) -> None:
    fake.reject_entities_next()
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(CHAT, "<b>fine</b>", parse_mode="HTML")
    # Plain text is not affected, and the rejection was used up by the first call.
    await bot.send_message(CHAT, "plain")
    assert (await bot.send_message(CHAT, "<b>fine</b>", parse_mode="HTML")).text == "fine"
    assert [m["text"] for m in fake.sent_messages(CHAT)] == ["plain", "fine"]


async def test_commands(fake: FakeTelegram, bot: Bot) -> None:
    assert await bot.set_my_commands([BotCommand(command="start", description="Start")])
    assert fake.commands == [{"command": "start", "description": "Start"}]
    with pytest.raises(BadRequest, match=r"(?i)BOT_COMMAND_INVALID"):
        await bot.set_my_commands([BotCommand(command="Bad-Name", description="x")])
    assert await bot.close() is True and await bot.log_out() is True


# --------------------------------------------------------------------------- waiting helpers


async def test_await_sent_and_timeout_message(fake: FakeTelegram, bot: Bot) -> None:
    async def later() -> None:
        await asyncio.sleep(0.2)
        await bot.send_message(CHAT, "eventually")

    task = asyncio.create_task(later())
    sent = await fake.await_sent(CHAT, timeout=5)
    await task
    assert sent[0]["text"] == "eventually"
    with pytest.raises(AssertionError, match="expected >= 2 sent messages to chat 4242"):
        await fake.await_sent(CHAT, count=2, timeout=0.2)


def test_sync_usage_with_wait_for_sent(fake: FakeTelegram) -> None:
    def bot_thread() -> None:
        time.sleep(0.2)
        httpx.post(f"{fake.url}/bot{fake.token}/sendMessage", data={"chat_id": "7", "text": "from thread"})

    threading.Thread(target=bot_thread).start()
    assert fake.wait_for_sent(7, timeout=5)[0]["text"] == "from thread"
    assert fake.wait_for_call("sendMessage")[0].status == 200
    with pytest.raises(AssertionError):
        fake.wait_for_sent(None, count=5, timeout=0.1)


async def test_ptb_application_polling_end_to_end(fake: FakeTelegram) -> None:
    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        await update.message.reply_text("welcome", do_quote=False)

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        await update.message.reply_text(f"echo: {update.message.text}", do_quote=True)

    app = Application.builder().bot(_bot_for(fake)).updater(None).build()
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    async with app:
        await app.start()
        try:
            for text in ("/start", "ping"):
                fake.user_sends(CHAT, text)
            async with httpx.AsyncClient() as client:
                raw = (await client.get(f"{fake.url}/bot{fake.token}/getUpdates")).json()["result"]
            for update in raw:
                await app.process_update(Update.de_json(update, app.bot))
            sent = await fake.await_sent(CHAT, count=2, timeout=10)
            assert [m["text"] for m in sent] == ["welcome", "echo: ping"]
            assert sent[1]["reply_to_message"]["message_id"] == raw[1]["message"]["message_id"]
        finally:
            await app.stop()
    assert fake.errors == []
