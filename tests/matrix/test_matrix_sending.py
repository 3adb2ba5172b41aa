"""A worker that sends on Matrix without syncing (another worker receives), on a real Synapse: it logs in on the kept
session, finds the existing DM without a room list (never opening a second one), and what it sends is seen by the
syncing worker as ours (a thread it answered in addresses the bot there too)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from nio import AsyncClient, JoinedRoomsResponse, RoomCreateResponse
from pydantic import SecretStr

from bicameral.channels.base import Cursor
from bicameral.channels.matrix import MatrixChannel, MatrixConfig
from bicameral.events import Inbound, SendText
from tests.support.chat import eventually


def channel_for(synapse, bot, data_dir) -> MatrixChannel:
    """The bot's channel as `bicameral run` makes it: a password login kept in the shared data dir."""
    return MatrixChannel(MatrixConfig(
        homeserver=synapse.url, user_id=bot.user_id, access_token=None, password=SecretStr(bot.password),
        data_dir=data_dir, attachments_dir=data_dir / "attachments", session_file=data_dir / "matrix" / "session.json",
        may_invite=lambda user: True, sync_timeout_ms=1000,
    ))


async def bot_session(synapse, bot) -> AsyncClient:
    client = AsyncClient(synapse.url, bot.user_id)
    client.access_token, client.user_id, client.device_id = bot.access_token, bot.user_id, bot.device_id
    return client


async def rooms_of(client: AsyncClient) -> set[str]:
    joined = await client.joined_rooms()
    assert isinstance(joined, JoinedRoomsResponse), joined
    return set(joined.rooms)


async def invited_and_joined(person, bot_client: AsyncClient, *others, direct: bool, name: str | None = None) -> str:
    invited = [bot_client.user_id, *(other.user.user_id for other in others)]
    made = await person.client.room_create(is_direct=direct, invite=invited, name=name)
    assert isinstance(made, RoomCreateResponse), made
    await bot_client.join(made.room_id)
    for other in others:
        await other.client.join(made.room_id)
    for user in invited:
        await person.joined(made.room_id, user)
    return str(made.room_id)


class Sink:
    """The gate as the syncing channel sees it: keeps every batch (and its cursor)."""

    def __init__(self) -> None:
        self.inbound: list[Inbound] = []
        self.position: str | None = None

    async def __call__(self, batch: Sequence[Inbound], cursor: Cursor | None = None) -> None:
        self.inbound += batch
        self.position = cursor.position if cursor else self.position

    def cursor(self, channel: str) -> str | None:
        return self.position


async def test_a_sending_worker_finds_the_dm_and_rooms_without_a_sync_and_reuses_the_kept_device(
    synapse, matrix_user, human, tmp_path
):
    bot, ann, bob = matrix_user("bot", "Archie"), human("ann"), human("bob")
    other = await bot_session(synapse, bot)
    try:
        dm = await invited_and_joined(ann, other, direct=True)
        team = await invited_and_joined(ann, other, direct=False, name="Team")
        before = await rooms_of(other)
        first, second = channel_for(synapse, bot, tmp_path), channel_for(synapse, bot, tmp_path)
        await asyncio.gather(first.start_sending(), second.start_sending())  # two workers starting together
        try:
            assert first.me.display_name == "Archie"
            assert first._client.device_id == second._client.device_id  # one login kept and shared: no device each
            assert (await first.perform(SendText(f"matrix:{ann.user.user_id}", "for the owner"))).ok
            assert (await first.perform(SendText(f"matrix:{team}", "for the team"))).ok
            assert [e["content"]["body"] for e in await ann.await_from(dm, bot.user_id)] == ["for the owner"]
            assert [e["content"]["body"] for e in await ann.await_from(team, bot.user_id)] == ["for the team"]
            assert await rooms_of(other) == before, "no second DM was opened"
            # Which rooms are DMs is known without a sync too (the owner's own chat is their DM room).
            assert await eventually(lambda: second.is_direct_with(f"matrix:{dm}", ann.user.user_id), "the DM known")
            assert not first.is_direct_with(f"matrix:{team}", ann.user.user_id)
            # A person with no DM yet gets one, once: another sending worker finds it and sends there too.
            assert (await first.perform(SendText(f"matrix:{bob.user.user_id}", "hello bob"))).ok
            assert (await second.perform(SendText(f"matrix:{bob.user.user_id}", "again"))).ok
            opened = await rooms_of(other) - before
            assert len(opened) == 1
            bobs = opened.pop()
            assert first.is_direct_with(f"matrix:{bobs}", bob.user.user_id)
            assert second.is_direct_with(f"matrix:{bobs}", bob.user.user_id)
            await bob.client.join(bobs)
            assert [e["content"]["body"] for e in await bob.await_from(bobs, bot.user_id, 2)] == [
                "hello bob", "again"]
        finally:
            await first.stop()
            await second.stop()
    finally:
        await other.close()


async def test_a_thread_another_worker_answered_in_addresses_the_bot_at_the_syncing_worker(
    synapse, matrix_user, human, tmp_path
):
    bot, ann, bob = matrix_user("bot", "Archie"), human("ann"), human("bob")
    other = await bot_session(synapse, bot)
    receiving, sending = channel_for(synapse, bot, tmp_path), channel_for(synapse, bot, tmp_path)
    sink = Sink()
    try:
        team = await invited_and_joined(ann, other, bob, direct=False, name="Team")  # three: not a DM
        await receiving.start(sink, lambda reason: None)
        await sending.start_sending()
        await eventually(lambda: sink.position is not None, "the first sync (history before it is skipped)", timeout=30)
        root = await ann.say(team, "who is bringing lunch?")  # not for the bot
        await eventually(lambda: any(i.message_id == root for i in sink.inbound), "the root synced", timeout=30)
        assert not next(i for i in sink.inbound if i.message_id == root).addressed
        # The worker that ran the turn (not the syncing one) answers in the message's thread...
        sent = await sending.perform(SendText(f"matrix:{team}", "I can", thread_id=root, reply_to=root))
        assert sent.ok
        thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": True,
                                   "m.in_reply_to": {"event_id": sent.message_ids[0]}}}
        follow = await ann.say(team, "great, and drinks?", **thread)
        # ...and the follow-up there, with no mention, addresses the bot where it is received.
        found = await eventually(lambda: next((i for i in sink.inbound if i.message_id == follow), None),
                                 "the follow-up synced", timeout=30)
        assert found.addressed and found.thread_id == root
    finally:
        await receiving.stop()
        await sending.stop()
        await other.close()
