"""The Matrix rooms the bot is in: invites answered, joins retried, encrypted rooms left, upgrades followed, admins."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from nio import Api, AsyncClient, JoinResponse, MatrixRoom, RoomSendResponse, SyncResponse

from bicameral.events import SendText, chat_key

from .actions import ActionPerformer
from .translate import CHANNEL, Room

log = logging.getLogger(__name__)

ADMIN_LEVEL = 50  # Matrix's moderator level: a room's admins, as far as stopping others' work goes
CREATORS_RULE_FROM = 12  # the room version from which creators are privileged without a power level
JOIN_TRIES = 5  # joins tried (one a sync) before an invite is given up
ENCRYPTED_NOTICE = (
    "This room is end-to-end encrypted, and I can't read encrypted rooms, so I'm leaving it. "
    "Invite me to a room without encryption, or talk to me directly in an unencrypted DM."
)
UPGRADED_NOTICE = "A room you upgraded moved to a new room that I can't join by myself: please invite me there."


class Rooms:
    """What the channel knows and does about its rooms, apart from their messages."""

    def __init__(
        self,
        client: AsyncClient,
        actions: ActionPerformer,
        *,
        may_invite: Callable[[str], bool],
        redact: Callable[[str], str],
    ) -> None:
        self._client = client
        self._actions = actions
        self._may_invite = may_invite
        self._redact = redact
        self.left: set[str] = set()  # rooms left for good (encrypted, upgraded): their later events are not ours
        self.pending_joins: dict[str, int] = {}  # rooms whose invite we accepted but could not join yet → tries
        self._creators: dict[str, frozenset[str]] = {}  # room → its creators, where they outrank power levels

    def view(self, room_id: str) -> Room:
        """What translating a room's messages needs: whether it is a DM, its name, members' names, its admins."""
        known: MatrixRoom | None = self._client.rooms.get(room_id)
        if known is None:
            return Room(room_id, private=False, title=None, names={})
        names = {user: (member.display_name or user) for user, member in known.users.items()}
        admins = frozenset(user for user in known.users if known.power_levels.get_user_level(user) >= ADMIN_LEVEL)
        admins |= self._creators.get(room_id, frozenset())
        return Room(room_id, private=known.member_count <= 2, title=known.display_name, names=names, admins=admins)

    def note_creators(self, room_id: str, events: Sequence[dict[str, Any]]) -> None:
        """From room version 12 a room's creators outrank every power level (and are not listed among them)."""
        for event in events:
            content = event.get("content")
            if event.get("type") != "m.room.create" or not isinstance(content, dict):
                continue
            version = str(content.get("room_version", "1"))
            if not version.isdigit() or int(version) < CREATORS_RULE_FROM:
                continue
            extra = content.get("additional_creators")
            creators = {event.get("sender"), *(extra if isinstance(extra, list) else ())}
            self._creators[room_id] = frozenset(c for c in creators if isinstance(c, str))

    async def answer_invites(self, response: SyncResponse, me: str) -> None:
        """Join where someone allowed invites us; decline (leave) every other invite without a word."""
        for room_id in list(self.pending_joins):
            await self.join(room_id)
        for room_id, invited in response.rooms.invite.items():
            state = [event.source for event in invited.invite_state]
            inviter = next((e.get("sender") for e in state if e.get("type") == "m.room.member"
                            and e.get("state_key") == me), None)
            if not isinstance(inviter, str) or not self._may_invite(inviter):
                log.info("matrix: declined an invite to %s from %s", room_id, inviter)
                await self._quietly(self._client.room_leave(room_id))
                continue
            log.info("matrix: joining %s at the invite of %s", room_id, inviter)
            if await self.join(room_id) and any(e.get("type") == "m.room.encryption" for e in state):
                await self._leave_encrypted(room_id)

    async def join(self, room_id: str) -> bool:
        """Join a room we were invited to; a failure is tried again with the next syncs (an invite shows only once)."""
        joined = await self._client.join(room_id)
        if isinstance(joined, JoinResponse):
            self.pending_joins.pop(room_id, None)
            return True
        tries = self.pending_joins.pop(room_id, 0) + 1
        if tries < JOIN_TRIES:
            self.pending_joins[room_id] = tries
        log.warning("matrix: could not join %s (try %d of %d): %s %s", room_id, tries, JOIN_TRIES,
                    getattr(joined, "status_code", ""), getattr(joined, "message", joined))
        return False

    async def refused(self, room_id: str, events: Sequence[dict[str, Any]]) -> bool:
        """An encrypted room is said goodbye to; an upgraded one (a tombstone) is followed to its replacement."""
        for event in events:
            kind = event.get("type")
            if kind == "m.room.encryption" or kind == "m.room.encrypted":
                await self._leave_encrypted(room_id)
                return True
            content = event.get("content")
            if kind == "m.room.tombstone" and isinstance(content, dict):
                replacement = content.get("replacement_room")
                if isinstance(replacement, str) and replacement.startswith("!"):
                    await self._follow(room_id, replacement, event.get("sender"))
                    return True
        return False

    async def _follow(self, room_id: str, replacement: str, upgrader: object) -> None:
        self.left.add(room_id)
        joined = await self._client.join(replacement)
        log.info("matrix: %s was upgraded to %s; joining it: %s", room_id, replacement, type(joined).__name__)
        if not isinstance(joined, JoinResponse) and isinstance(upgrader, str):
            # An invite-only room, and the old one now lets only its admins speak: the person who upgraded it
            # hears in our DM that they can invite us.
            told = await self._actions.perform(SendText(chat_key(CHANNEL, upgrader), UPGRADED_NOTICE, purpose="notice"))
            log.info("matrix: asked %s for an invite to %s: %s", upgrader, replacement, told.ok)

    async def _leave_encrypted(self, room_id: str) -> None:
        log.warning("matrix: leaving the encrypted room %s (end-to-end encryption is not supported)", room_id)
        self.left.add(room_id)
        notice = {"msgtype": "m.notice", "body": ENCRYPTED_NOTICE}
        # Sent as it is: nio would try to encrypt it for an encrypted room.
        method, path, data = Api.room_send(self._client.access_token, room_id, "m.room.message", notice, str(uuid.uuid4()))
        await self._quietly(self._client._send(RoomSendResponse, method, path, data, (room_id,)))
        await self._quietly(self._client.room_leave(room_id))

    async def _quietly(self, call: Any) -> None:
        try:
            await call
        except Exception as exc:
            log.info("matrix: %s", self._redact(f"{type(exc).__name__}: {exc}"))


def after_own_join(events: Sequence[dict[str, Any]], me: str) -> Sequence[dict[str, Any]]:
    """The events after our own join in this batch: what a room said before we came is not addressed to us."""
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        content = event.get("content")
        unsigned = event.get("unsigned")
        before = unsigned.get("prev_content") if isinstance(unsigned, dict) else None
        if (event.get("type") == "m.room.member" and event.get("state_key") == me and isinstance(content, dict)
                and content.get("membership") == "join"
                and not (isinstance(before, dict) and before.get("membership") == "join")):
            return events[index + 1 :]
    return events
