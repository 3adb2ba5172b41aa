"""A person on the test homeserver, driven with matrix-nio: makes rooms, invites, writes, and reads what came back."""

from __future__ import annotations

from typing import Any

from nio import AsyncClient, RoomCreateResponse, RoomMessagesResponse, RoomSendResponse

from tests.support.chat import eventually
from tests.support.synapse import MatrixUser


class Human:
    def __init__(self, url: str, user: MatrixUser) -> None:
        self.user = user
        self.client = AsyncClient(url, user.user_id)
        self.client.access_token = user.access_token
        self.client.user_id = user.user_id
        self.client.device_id = user.device_id

    async def close(self) -> None:
        await self.client.close()

    async def room(self, bot: str, *people: Human, direct: bool = False, name: str | None = None) -> str:
        """A new room with the bot and these people invited; returns once all of them have joined."""
        invited = [bot, *(person.user.user_id for person in people)]
        made = await self.client.room_create(is_direct=direct, invite=invited, name=name)
        assert isinstance(made, RoomCreateResponse), made
        for person in people:
            await person.client.join(made.room_id)
        for user in invited:
            await self.joined(made.room_id, user)
        return str(made.room_id)

    async def joined(self, room: str, user: str, timeout: float = 20.0) -> None:
        async def present() -> bool:
            members = await self.client.joined_members(room)
            return user in [m.user_id for m in getattr(members, "members", [])]

        await eventually(present, f"{user} to join {room}", timeout=timeout)

    async def accept_invite(self, timeout: float = 30.0) -> str:
        """Wait for an invite, join its room and return the room's id."""

        async def invited() -> str | None:
            synced = await self.client.sync(timeout=500)
            for room_id in getattr(getattr(synced, "rooms", None), "invite", {}):
                await self.client.join(room_id)
                return str(room_id)
            return None

        return await eventually(invited, f"an invite for {self.user.user_id}", timeout=timeout)

    async def send(self, room: str, content: dict[str, Any]) -> str:
        sent = await self.client.room_send(room, "m.room.message", content)
        assert isinstance(sent, RoomSendResponse), sent
        return str(sent.event_id)

    async def say(self, room: str, text: str, **extra: Any) -> str:
        return await self.send(room, {"msgtype": "m.text", "body": text, **extra})

    async def events(self, room: str, sender: str | None = None) -> list[dict[str, Any]]:
        """The room's message events, oldest first (by `sender` only, when given)."""
        page = await self.client.room_messages(room, start=None, limit=100)
        assert isinstance(page, RoomMessagesResponse), page
        found = [e.source for e in reversed(page.chunk) if e.source.get("type") == "m.room.message"]
        return [e for e in found if sender is None or e.get("sender") == sender]

    async def await_from(self, room: str, sender: str, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until `sender` has sent at least `count` messages to the room; returns them all."""

        async def enough() -> list[dict[str, Any]] | None:
            found = await self.events(room, sender)
            return found if len(found) >= count else None

        return await eventually(enough, f"{count} message(s) from {sender} in {room}", timeout=timeout)
