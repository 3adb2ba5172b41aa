"""Who the Matrix channel listens to: the Matrix owner is the owner; strangers' invites are declined; encrypted rooms
are refused with a word; a revoked token stops the app like Telegram's does."""

from __future__ import annotations

import json

import httpx
from nio import RoomCreateResponse, RoomGetStateEventResponse

from bicameral.channels.matrix.rooms import ENCRYPTED_NOTICE
from bicameral.channels.matrix.session import REVOKED
from tests.fakes.model_server import Reply
from tests.support.chat import eventually


async def membership(person, room: str, user: str) -> str | None:
    state = await person.client.room_get_state_event(room, "m.room.member", user)
    return state.content.get("membership") if isinstance(state, RoomGetStateEventResponse) else None


async def test_the_matrix_owner_is_the_owner(matrix_app, human, models):
    models.responder(lambda request: Reply(text="hello owner"))
    ann = human("ann")
    await matrix_app(matrix_owner_id=ann.user.user_id)  # nobody else is allowed: the owner needs no listing
    bot = matrix_app.bot.user_id
    room = await ann.room(bot, direct=True)
    await ann.say(room, "/access")  # an owner command: from anyone else it is dropped unread
    shown = (await ann.await_from(room, bot))[0]["content"]["body"]
    assert "policy" in shown.lower()
    await ann.say(room, "hi")
    assert (await ann.await_from(room, bot, 2))[1]["content"]["body"] == "hello owner"
    assert models.requests_for()  # the model answered the owner


async def test_invites_from_strangers_are_declined_even_in_a_flood(matrix_app, human):
    ann, eve = human("ann"), human("eve")
    await matrix_app(matrix_owner_id=ann.user.user_id)
    bot = matrix_app.bot.user_id
    rooms = []
    for _ in range(5):
        made = await eve.client.room_create(invite=[bot])
        assert isinstance(made, RoomCreateResponse)
        rooms.append(made.room_id)
    for room in rooms:
        await eventually(lambda room=room: _is(eve, room, bot, "leave"), "the stranger's invite to be declined", timeout=30)


async def _is(person, room: str, user: str, wanted: str) -> bool:
    return await membership(person, room, user) == wanted


async def test_an_encrypted_room_is_refused_with_a_word_to_the_inviter(matrix_app, human):
    ann = human("ann")
    await matrix_app(matrix_owner_id=ann.user.user_id)
    bot = matrix_app.bot.user_id
    encryption = {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
    made = await ann.client.room_create(invite=[bot], initial_state=[encryption])
    assert isinstance(made, RoomCreateResponse)
    notice = (await ann.await_from(made.room_id, bot))[0]["content"]
    assert notice["msgtype"] == "m.notice" and notice["body"] == ENCRYPTED_NOTICE
    await eventually(lambda: _is(ann, made.room_id, bot, "leave"), "the bot to leave the encrypted room", timeout=30)


async def test_a_revoked_token_stops_the_app_like_telegrams(matrix_app, human, synapse):
    app = await matrix_app()
    session = json.loads((app.settings.data_dir / "matrix" / "session.json").read_text())
    assert oct((app.settings.data_dir / "matrix" / "session.json").stat().st_mode & 0o777) == "0o600"
    headers = {"Authorization": f"Bearer {session['access_token']}"}
    async with httpx.AsyncClient() as client:
        assert (await client.post(f"{synapse.url}/_matrix/client/v3/logout", headers=headers, timeout=10)).status_code == 200
    await eventually(lambda: app.exit_code == 1, "the app to stop with status 1", timeout=60)
    matrix = next(channel for channel in app.channels if channel.name == "matrix")
    assert matrix.failure == REVOKED
