"""The owner's short digest of who the gate refused since the last one."""

from __future__ import annotations

from collections.abc import Sequence

from bicameral.store.unauthorized import RefusedChat

_MAX_LINES = 10


def refused_digest(refused: Sequence[RefusedChat]) -> str:
    """One line per refused chat, newest first; access.json is where the owner lets someone in."""
    lines = ["Refused by the access policy since my last note (access.json decides who may talk to me):"]
    for chat in refused[:_MAX_LINES]:
        messages = f"{chat.new} message{'s' if chat.new != 1 else ''}"
        who = f"{chat.sender_name or 'someone'} (id {chat.sender_id})"
        if chat.title:
            lines.append(f"- group “{chat.title}” ({chat.chat}): {messages}, last from {who}")
        else:
            lines.append(f"- {who}: {messages}")
    if len(refused) > _MAX_LINES:
        lines.append(f"- and {len(refused) - _MAX_LINES} more chats")
    return "\n".join(lines)
