"""Approvals on Matrix, which has no buttons: the request lists 1. Approve and 2. Deny in the owner's DM, and the
owner's typed "1" or "approve" there answers it, although the request was addressed to their user id (the DM is a room
of its own). A member's "1", or the owner's own "1" in another room, approves nothing."""

from __future__ import annotations

from bicameral.channels.base import own_chats
from bicameral.events import Owners
from tests.e2e.test_approvals import Jot, _calls_then_says, _plugins
from tests.fakes.model_server import ToolCall
from tests.matrix.test_matrix_chat import allow_room
from tests.support.chat import eventually, quiet_for

ASK = "Approve this tool call?"


async def _asks(person, dm: str, bot: str, n: int) -> list[dict]:
    async def enough() -> list[dict] | None:
        found = [e for e in await person.events(dm, bot) if e["content"]["body"].startswith(ASK)]
        return found if len(found) >= n else None

    return await eventually(enough, f"{n} approval request(s) in the owner's DM", timeout=30)


async def test_the_owner_approves_by_typing_in_their_dm(matrix_app, human, models, make_settings):
    _plugins(make_settings, ask_before=["jot_down"])
    jot = Jot()
    models.responder(_calls_then_says(ToolCall("jot_down", {"text": "milk"}), ToolCall("jot_down", {"text": "eggs"})))
    ann, bob = human("ann"), human("bob")
    app = await matrix_app(matrix_owner_id=ann.user.user_id, allowed=[bob.user.user_id], extra_tools=[jot])
    bot = matrix_app.bot.user_id
    dm = await ann.room(bot, direct=True)
    team = await ann.room(bot, bob, name="Team")
    allow_room(app, team)
    # The owner's own chats, as the approvals and the Claude Code executor see them: her DM is, the group is not.
    own = own_chats(Owners.of(matrix=ann.user.user_id), app.channels)
    await eventually(lambda: own(f"matrix:{dm}"), "the DM known as the owner's")
    assert not own(f"matrix:{team}") and own(f"matrix:{ann.user.user_id}")
    await ann.say(team, "Archie, note milk and eggs")

    [asked] = await _asks(ann, dm, bot, 1)  # asked of matrix:<ann>, sent to the room that is her DM
    body = asked["content"]["body"]
    assert 'jot_down {"text": "milk"}' in body and body.endswith("1. Approve\n2. Deny")
    await bob.say(team, "1")  # a member
    await ann.say(team, "1")  # the owner, but not where she was asked
    await quiet_for(1.0, "a typed 1 in the wrong place would have run the tool by now")
    assert jot.ran == []

    await ann.say(dm, "1")
    await _asks(ann, dm, bot, 2)  # the first ran; the second call asks again
    assert jot.ran == ["milk"]
    await ann.say(dm, "Approve")

    async def answered() -> str | None:
        said = [e["content"]["body"] for e in await ann.events(team, bot)]
        return next((b for b in said if b.startswith("results:")), None)

    assert await eventually(answered, "the answer in the team room", timeout=30) == "results: jotted milk | jotted eggs"
    assert jot.ran == ["milk", "eggs"]


async def test_the_owner_approves_in_the_dm_the_call_came_from(matrix_app, human, models, make_settings):
    _plugins(make_settings, ask_before=["jot_down"])
    jot = Jot()
    models.responder(_calls_then_says(ToolCall("jot_down", {"text": "tea"})))
    ann = human("ann")
    await matrix_app(matrix_owner_id=ann.user.user_id, extra_tools=[jot])
    bot = matrix_app.bot.user_id
    dm = await ann.room(bot, direct=True)
    await ann.say(dm, "note tea")
    [asked] = await _asks(ann, dm, bot, 1)
    assert "in this chat" in asked["content"]["body"]  # asked where she wrote: her DM is her own chat
    await ann.say(dm, "2")

    async def answered() -> str | None:
        said = [e["content"]["body"] for e in await ann.events(dm, bot)]
        return next((b for b in said if b.startswith("results:")), None)

    assert await eventually(answered, "the answer", timeout=30) == "results: ERROR: denied by the owner"
    assert jot.ran == []
