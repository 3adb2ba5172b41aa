"""What the channel does in a room, as the person there sees it: edits, reactions, redactions, typing, files, read
receipts, long texts in parts."""

from __future__ import annotations

from nio import RoomMessagesResponse

from bicameral.events import DeleteMessage, EditText, React, SendFile, SendText, Typing
from tests.fakes.model_server import Reply
from tests.support.chat import eventually


async def all_events(person, room: str) -> list[dict]:
    page = await person.client.room_messages(room, start=None, limit=100)
    assert isinstance(page, RoomMessagesResponse)
    return [e.source for e in reversed(page.chunk)]


async def test_actions_arrive_as_matrix_events(matrix_app, human, models):
    models.responder(lambda request: Reply(text="ok"))
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, direct=True)
    asked = await ann.say(room, "hello")
    await ann.await_from(room, bot)
    matrix = next(c for c in app.channels if c.name == "matrix")
    chat = f"matrix:{room}"

    sent = await matrix.perform(SendText(chat, "first *draft*", reply_to=asked))
    assert sent.ok
    (ours,) = sent.message_ids
    assert (await matrix.perform(EditText(chat, ours, "final **text**"))).ok
    assert (await matrix.perform(React(chat, asked, "👍"))).ok
    assert (await matrix.perform(Typing(chat))).ok
    doomed = (await matrix.perform(SendText(chat, "to be deleted"))).message_ids[0]
    assert (await matrix.perform(DeleteMessage(chat, doomed))).ok
    workspace = app.settings.data_dir / "report.txt"
    workspace.write_text("the report")
    file_sent = await matrix.perform(SendFile(chat, "report.txt", caption="your report"))
    assert file_sent.ok
    long = await matrix.perform(SendText(chat, "x" * 20_000))
    assert long.ok and len(long.message_ids) == 2

    events = {e["event_id"]: e for e in await all_events(ann, room)}
    assert events[ours]["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}
    edit = next(e for e in events.values() if e["content"].get("m.relates_to", {}).get("rel_type") == "m.replace")
    assert edit["content"]["m.new_content"]["formatted_body"] == "final <strong>text</strong>"
    reaction = next(e for e in events.values() if e["type"] == "m.reaction")
    assert reaction["content"]["m.relates_to"] == {"rel_type": "m.annotation", "event_id": asked, "key": "👍"}
    assert events[doomed]["content"] == {}  # redacted
    upload = events[file_sent.message_ids[0]]["content"]
    assert upload["msgtype"] == "m.file" and upload["body"] == "your report" and upload["url"].startswith("mxc://")

    async def read_by_bot() -> bool:
        synced = await ann.client.sync(timeout=0, full_state=True)
        joined = synced.rooms.join.get(room)
        receipts = [r for e in (joined.ephemeral if joined else []) for r in getattr(e, "receipts", [])]
        return any(r.user_id == bot and r.event_id == asked for r in receipts)

    await eventually(read_by_bot, "the bot's read receipt on the message it answered")


async def test_a_file_outside_the_data_dir_is_refused(matrix_app, human):
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id])
    room = await ann.room(matrix_app.bot.user_id, direct=True)
    matrix = next(c for c in app.channels if c.name == "matrix")
    refused = await matrix.perform(SendFile(f"matrix:{room}", "../../etc/passwd"))
    assert not refused.ok
