"""Who may see which memory: the one place the scope rules live.

- a person's private facts (`user:<channel>:<id>`): only in that person's DMs and in their own lane of a group;
- a group's shared facts (`chat:<chat>`): only in that group;
- global notes (`global`): everywhere; only the owner writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GLOBAL = "global"
Where = Literal["me", "group", "global"]


class OutOfReach(ValueError):
    """A write or forget aimed at memory this conversation may not touch."""


@dataclass(frozen=True)
class Reach:
    """The memory one conversation may use; build it with `reach_for`, never by hand."""

    chat: str
    person: str | None  # `channel:user id` of the one person this conversation belongs to
    group: bool
    owner: bool = False

    @property
    def readable(self) -> tuple[str, ...]:
        scopes = [GLOBAL]
        if self.person is not None:
            scopes.append(user_scope(self.person))
        if self.group:
            scopes.append(chat_scope(self.chat))
        return tuple(scopes)

    def writable(self, where: Where | None) -> str:
        """The scope a new fact goes to; `None` means the natural one (private, else the group's)."""
        where = where or ("me" if self.person is not None else "group")
        if where == "me":
            if self.person is None:
                raise OutOfReach("private facts cannot be kept from a shared group conversation; use where='group'")
            return user_scope(self.person)
        if where == "group":
            if not self.group:
                raise OutOfReach("this is a private chat, not a group; use where='me'")
            return chat_scope(self.chat)
        if not self.owner:
            raise OutOfReach("only the owner writes global notes")
        return GLOBAL

    @property
    def forgettable(self) -> tuple[str, ...]:
        """Scopes whose entries this conversation may delete: its own, plus global for the owner."""
        return tuple(s for s in self.readable if s != GLOBAL or self.owner)

    @property
    def history_person(self) -> str | None:
        """Whose messages across every chat they are in may be searched: only from that person's DM.

        Anywhere else the search stays inside the current chat, so a DM is never quoted into a group.
        """
        return self.person if not self.group else None

    def describe(self, scope: str) -> str:
        if scope == GLOBAL:
            return "global"
        return "private" if scope.startswith("user:") else "this group"


def user_scope(person: str) -> str:
    return f"user:{person}"


def chat_scope(chat: str) -> str:
    return f"chat:{chat}"


def person_key(channel: str, sender_id: str) -> str:
    return f"{channel}:{sender_id}"


def reach_for(chat: str, *, channel: str, sender_id: str | None, private: bool, own_lane: bool, owner: bool) -> Reach:
    """A DM reaches its person's facts; a group reaches the group's, and the sender's only in their own lane.

    A group lane shared by everyone (single mode) never sees anyone's private facts: its session and
    replies are seen by the whole group.
    """
    person = person_key(channel, sender_id) if sender_id is not None and (private or own_lane) else None
    return Reach(chat=chat, person=person, group=not private, owner=owner)
