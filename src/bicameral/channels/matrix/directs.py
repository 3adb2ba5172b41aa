"""Finding our DM rooms by asking the homeserver, for a worker that sends without syncing (it has no room list)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nio import AsyncClient, DirectRoomsResponse, JoinedRoomsResponse, RoomGetStateResponse


async def dm_partner(client: AsyncClient, room_id: str) -> str | None:
    """Who `room_id` is our DM with, from its current state; None when it is not one. Raises OSError when the
    homeserver does not answer, so that a send waiting on it fails and is tried again rather than guessing."""
    state = await client.room_get_state(room_id)
    if not isinstance(state, RoomGetStateResponse):
        if getattr(state, "status_code", None) in ("M_FORBIDDEN", "M_NOT_FOUND"):
            return None  # a room we left, or one that is gone
        raise OSError(f"could not read the state of {room_id}: {getattr(state, 'message', state)}")
    return partner(state.events, str(client.user_id))


def partner(events: Sequence[dict[str, Any]], me: str) -> str | None:
    """The other member of a DM as the state events show it; the test the syncing worker makes on its room list:
    just the two of us (joined or invited), no name or canonical alias, not upgraded away (a tombstone)."""
    members: set[str] = set()
    for event in events:
        kind, content = event.get("type"), event.get("content")
        if not isinstance(content, dict):
            continue
        if kind == "m.room.member" and content.get("membership") in ("join", "invite"):
            members.add(str(event.get("state_key", "")))
        elif (kind == "m.room.name" and content.get("name")) or (
            kind == "m.room.canonical_alias" and content.get("alias")
        ) or (kind == "m.room.tombstone" and content.get("replacement_room")):
            return None
    others = members - {me}
    return others.pop() if me in members and len(others) == 1 else None


async def find_direct(client: AsyncClient, user: str) -> str | None:
    """Our DM room with `user` among the rooms we are in (those `m.direct` names for them first), or None when there
    is none. Raises OSError when the homeserver does not answer: a new DM is opened only when none surely exists."""
    joined = await joined_rooms(client)
    hinted = await client.list_direct_rooms()  # an error here is only "none marked": every joined room is looked at
    named = hinted.rooms.get(user, []) if isinstance(hinted, DirectRoomsResponse) else []
    rooms = [room for room in named if room in joined] + [room for room in joined if room not in named]
    for room_id in rooms:
        if await dm_partner(client, room_id) == user:
            return str(room_id)
    return None


async def joined_rooms(client: AsyncClient) -> list[str]:
    """The rooms we are in, as the homeserver lists them (OSError when it does not answer)."""
    joined = await client.joined_rooms()
    if not isinstance(joined, JoinedRoomsResponse):
        raise OSError(f"could not list the joined rooms: {getattr(joined, 'message', joined)}")
    return [str(room) for room in joined.rooms]
