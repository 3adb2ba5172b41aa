"""The sync token is stored with the messages it brought: a restart neither answers twice nor loses a message."""

from __future__ import annotations

import asyncio
import json
import struct
import zlib

from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.support.chat import eventually, quiet_for
from tests.support.matrix_human import Human


async def test_a_restart_neither_replays_nor_loses_a_message(matrix_app, human, models):
    models.responder(lambda request: Reply(text=f"answer to: {request.last_user_text()[-40:]}"))
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, direct=True)
    await ann.say(room, "first question")
    await ann.await_from(room, bot, 1)
    await app.stop()
    session = app.settings.data_dir / "matrix" / "session.json"
    login = json.loads(session.read_text())

    # Started again with nothing new: the first question is not answered a second time.
    app = await matrix_app(allowed=[ann.user.user_id])
    assert json.loads(session.read_text()) == login  # the kept login is reused: no new device
    await eventually(lambda: app.stores.cursors.get("matrix"), "the restarted channel's first sync")
    await quiet_for(3.0, "a replayed message would have been answered by now")
    assert len(await ann.events(room, bot)) == 1
    await app.stop()

    # Written while it is stopped: answered once after the start.
    await ann.say(room, "second question, while you were away")
    await matrix_app(allowed=[ann.user.user_id])
    answers = await ann.await_from(room, bot, 2)
    assert "while you were away" in answers[1]["content"]["body"]
    await quiet_for(3.0, "a second answer to it would have been sent by now")
    assert len(await ann.events(room, bot)) == 2


async def test_a_fresh_account_does_not_answer_what_was_said_before_it_started(matrix_app, human, models, synapse):
    models.responder(lambda request: Reply(text="fresh answer"))
    ann = human("ann")
    bot = matrix_app.bot
    account = Human(synapse.url, bot)  # the bot's account in another client, before bicameral ever ran on it
    try:
        accepting = asyncio.create_task(_accept_invites(account))
        room = await ann.room(bot.user_id, direct=True)
        await accepting
    finally:
        await account.close()
    await ann.say(room, "old message from before")
    app = await matrix_app(allowed=[ann.user.user_id])
    await eventually(lambda: app.stores.cursors.get("matrix"), "the first sync")
    await ann.say(room, "new message")
    answers = await ann.await_from(room, bot.user_id, 1)
    await quiet_for(2.0, "an answer to the old message would have been sent by now")
    assert len(await ann.events(room, bot.user_id)) == 1
    assert answers[0]["content"]["body"] == "fresh answer"
    assert "new message" in models.requests_for()[0].last_user_text()
    assert "old message" not in json.dumps([r.messages for r in models.requests_for()])


async def _accept_invites(account: Human) -> None:
    async def joined() -> bool:
        synced = await account.client.sync(timeout=1000)
        for room_id in getattr(synced.rooms, "invite", {}):
            await account.client.join(room_id)
            return True
        return False

    await eventually(joined, "the bot's account to see the invite", timeout=20)


def tiny_png() -> bytes:
    """A real 2x2 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


async def test_an_image_is_downloaded_and_shown_to_the_model(matrix_app, human, models, tmp_path):
    models.responder(lambda request: Reply(text="a red square"))
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, direct=True)
    picture = tmp_path / "red.png"
    picture.write_bytes(tiny_png())
    with picture.open("rb") as file:
        uploaded, _ = await ann.client.upload(file, content_type="image/png", filename="red.png", filesize=picture.stat().st_size)
    await ann.send(room, {"msgtype": "m.image", "body": "red.png", "url": uploaded.content_uri,
                          "info": {"mimetype": "image/png", "size": picture.stat().st_size}})
    await ann.await_from(room, bot, 1)
    saved = list((app.settings.attachments_dir).rglob("*red.png"))
    assert saved and saved[0].read_bytes() == tiny_png()
    assert "image" in json.dumps(models.requests_for()[0].messages)


async def test_telegram_and_matrix_are_served_by_one_process(matrix_app, human, models, telegram):
    models.responder(lambda request: Reply(text="hello from one process"))
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id], telegram=True)
    assert sorted(channel.name for channel in app.channels) == ["matrix", "telegram"]
    room = await ann.room(matrix_app.bot.user_id, direct=True)
    await ann.say(room, "hi from matrix")
    telegram.user_sends(OWNER, "hi from telegram")
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    assert sent[0]["text"] == "hello from one process"
    answers = await ann.await_from(room, matrix_app.bot.user_id, 1)
    assert answers[0]["content"]["body"] == "hello from one process"


async def test_a_sent_document_is_read_by_the_same_pipeline_as_telegrams(matrix_app, human, models, tmp_path):
    models.responder(lambda request: Reply(text="read it"))
    ann = human("ann")
    await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, direct=True)
    notes = tmp_path / "notes.txt"
    notes.write_text("The launch code word is PELICAN.\n")
    with notes.open("rb") as file:
        uploaded, _ = await ann.client.upload(file, content_type="text/plain", filename="notes.txt",
                                              filesize=notes.stat().st_size)
    await ann.send(room, {"msgtype": "m.file", "body": "notes.txt", "filename": "notes.txt", "url": uploaded.content_uri,
                          "info": {"mimetype": "text/plain", "size": notes.stat().st_size}})
    await ann.await_from(room, bot, 1)
    assert "PELICAN" in json.dumps(models.requests_for()[0].messages)


async def test_a_voice_message_is_transcribed_like_a_telegram_voice_note(matrix_app, human, models, tmp_path):
    from tests.fakes.transcription_server import FakeTranscription

    endpoint = await FakeTranscription(key="voice-key", text="Remind me to water the plants at six.").start()
    try:
        models.responder(lambda request: Reply(text="heard you"))
        ann = human("ann")
        await matrix_app(allowed=[ann.user.user_id], transcription_base_url=endpoint.url,
                         transcription_api_key="voice-key", transcription_offline="off")
        bot = matrix_app.bot.user_id
        room = await ann.room(bot, direct=True)
        note = tmp_path / "note.ogg"
        note.write_bytes(b"OggS" + b"\x00" * 400)  # the endpoint is a fake: it hears words in any Ogg
        with note.open("rb") as file:
            uploaded, _ = await ann.client.upload(file, content_type="audio/ogg", filename="note.ogg",
                                                  filesize=note.stat().st_size)
        await ann.send(room, {"msgtype": "m.audio", "body": "note.ogg", "url": uploaded.content_uri,
                              "info": {"mimetype": "audio/ogg", "size": note.stat().st_size}, "org.matrix.msc3245.voice": {}})
        await ann.await_from(room, bot, 1)
        assert "water the plants at six" in json.dumps(models.requests_for()[0].messages)
    finally:
        await endpoint.stop()
