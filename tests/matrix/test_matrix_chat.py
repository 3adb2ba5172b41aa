"""The Matrix channel on a real Synapse: DMs answered, rooms answered when mentioned and in the message's thread."""

from __future__ import annotations

from tests.fakes.model_server import Reply
from tests.support.chat import eventually, quiet_for


def allow_room(app, room: str) -> None:
    """Rooms are allowed like Telegram groups: by id in access.json's allowed_chats."""
    app.gate.access.update(lambda config: config.model_copy(update={"allowed_chats": [room]}))


async def test_a_dm_is_answered(matrix_app, human, models):
    models.script(Reply(text="Hello **Ann**"))
    ann = human("ann")
    await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, direct=True)
    asked = await ann.say(room, "hi there")
    answer = (await ann.await_from(room, bot))[0]["content"]
    assert answer["body"] == "Hello **Ann**"
    assert answer["format"] == "org.matrix.custom.html"
    assert answer["formatted_body"] == "Hello <strong>Ann</strong>"
    assert "hi there" in models.requests_for()[0].last_user_text()
    assert asked  # the answer came to this message; in a DM it is not put in a thread
    assert "rel_type" not in answer.get("m.relates_to", {})


async def test_a_room_mention_is_answered_in_its_thread_and_other_messages_are_not(matrix_app, human, models):
    models.responder(lambda request: Reply(text="answered"))
    ann, bob = human("ann"), human("bob")
    app = await matrix_app(allowed=[ann.user.user_id, bob.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, bob, name="Team")
    allow_room(app, room)
    await ann.say(room, "lunch at noon?")  # not for the bot
    mentioned = await bob.say(room, "Archie, what is 2+2?")
    answer = (await ann.await_from(room, bot))[0]["content"]
    relation = answer["m.relates_to"]
    assert relation["rel_type"] == "m.thread" and relation["event_id"] == mentioned
    assert relation["m.in_reply_to"]["event_id"] == mentioned
    pill = (
        f'<a href="https://matrix.to/#/{bot}">Archie</a> and you?'
    )
    await ann.send(room, {"msgtype": "m.text", "body": "Archie and you?", "format": "org.matrix.custom.html",
                          "formatted_body": pill})
    await ann.await_from(room, bot, 2)
    # In the thread the bot answered in, a follow-up needs no mention (clients add the reply fallback to the latest).
    await bob.say(room, "and 3+3?", **{"m.relates_to": {"rel_type": "m.thread", "event_id": mentioned,
                                                        "is_falling_back": True, "m.in_reply_to": {"event_id": mentioned}}})
    followed = (await ann.await_from(room, bot, 3))[2]["content"]["m.relates_to"]
    admins = app.stores.db.query(
        "SELECT sender_id, json_extract(payload, '$.sender.is_admin') AS admin FROM messages WHERE direction = 'in'")
    assert {(r["sender_id"], bool(r["admin"])) for r in admins} == {(ann.user.user_id, True), (bob.user.user_id, False)}
    assert followed["rel_type"] == "m.thread" and followed["event_id"] == mentioned
    await quiet_for(2.0, "an answer to the unmentioned message would have been sent by now")
    assert len(await ann.events(room, bot)) == 3
    texts = [r.last_user_text() for r in models.requests_for()]
    assert not any("lunch at noon" in t and "2+2" not in t for t in texts)


async def test_a_reply_to_the_bot_addresses_it_and_an_edit_arrives_as_an_edit(matrix_app, human, models):
    models.responder(lambda request: Reply(text="noted"))
    ann, bob = human("ann"), human("bob")
    app = await matrix_app(allowed=[ann.user.user_id, bob.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, bob, name="Team")
    allow_room(app, room)
    first = await ann.say(room, f"{bot} remember the milk")
    ours = (await ann.await_from(room, bot))[0]
    await ann.say(room, "and eggs", **{"m.relates_to": {"m.in_reply_to": {"event_id": ours["event_id"]}}})
    await ann.await_from(room, bot, 2)
    await ann.send(room, {"msgtype": "m.text", "body": "* remember the oat milk",
                          "m.new_content": {"msgtype": "m.text", "body": f"{bot} remember the oat milk"},
                          "m.relates_to": {"rel_type": "m.replace", "event_id": first}})
    edits = await eventually(
        lambda: app.stores.db.query("SELECT text FROM messages WHERE kind = 'edit' AND message_id = ?", (first,)),
        "the edit to be stored against the first message",
    )
    assert "oat milk" in edits[0]["text"]


async def test_a_thread_the_bot_answered_in_stays_its_own_after_a_restart(matrix_app, human, models):
    models.responder(lambda request: Reply(text="in the thread"))
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, human("bob"), name="Team")
    allow_room(app, room)
    root = await ann.say(room, f"{bot} start a thread")
    await ann.await_from(room, bot)
    await app.stop()
    allow_room(await matrix_app(allowed=[ann.user.user_id]), room)  # the fixture writes access.json afresh
    await ann.say(room, "a follow-up without a mention", **{"m.relates_to": {
        "rel_type": "m.thread", "event_id": root, "is_falling_back": True, "m.in_reply_to": {"event_id": root}}})
    answer = (await ann.await_from(room, bot, 2))[1]["content"]
    assert answer["m.relates_to"]["event_id"] == root
    # The thread's question is shown with the follow-up, as the message it refers to.
    shown = models.requests_for()[-1].last_user_text()
    assert "start a thread" in shown and "a follow-up without a mention" in shown
