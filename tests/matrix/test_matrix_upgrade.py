"""A room upgrade (a tombstone in the old room): the bot follows to the new room, or asks to be invited there."""

from __future__ import annotations

import httpx
from nio import RoomPreset

from bicameral.channels.matrix.rooms import UPGRADED_NOTICE
from tests.fakes.model_server import Reply
from tests.matrix.test_matrix_chat import allow_room


async def upgrade(synapse, person, room: str) -> str:
    async with httpx.AsyncClient() as client:
        upgraded = await client.post(f"{synapse.url}/_matrix/client/v3/rooms/{room}/upgrade", json={"new_version": "10"},
                                     headers={"Authorization": f"Bearer {person.user.access_token}"}, timeout=30)
    assert upgraded.status_code == 200, upgraded.text
    return upgraded.json()["replacement_room"]


async def test_an_upgraded_public_room_is_followed(matrix_app, human, models, synapse):
    models.responder(lambda request: Reply(text="moved with you"))
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    made = await ann.client.room_create(name="Open", invite=[bot], preset=RoomPreset.public_chat)
    await ann.joined(made.room_id, bot)
    new = await upgrade(synapse, ann, made.room_id)
    await ann.joined(new, bot, timeout=30)
    allow_room(app, new)
    await ann.say(new, f"{bot} are you here?")
    assert (await ann.await_from(new, bot))[0]["content"]["body"] == "moved with you"


async def test_an_upgraded_invite_only_room_asks_to_be_invited(matrix_app, human, models, synapse):
    models.responder(lambda request: Reply(text="here now"))
    ann = human("ann")
    app = await matrix_app(allowed=[ann.user.user_id])
    bot = matrix_app.bot.user_id
    old = await ann.room(bot, name="Private")
    new = await upgrade(synapse, ann, old)
    direct = await ann.accept_invite()  # the old room lets only its admins speak now: the bot asks in a DM
    notice = (await ann.await_from(direct, bot))[0]["content"]
    assert notice["msgtype"] == "m.notice" and notice["body"] == UPGRADED_NOTICE
    await ann.client.room_invite(new, bot)
    await ann.joined(new, bot, timeout=30)
    allow_room(app, new)
    await ann.say(new, f"{bot} and now?")
    assert (await ann.await_from(new, bot))[0]["content"]["body"] == "here now"
