"""Translating raw Matrix room events into Inbound values; mentions, threads and replies read from their fields."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Container
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from bicameral.events import AttachmentKind, AttachmentRef, Inbound, InboundKind, Quoted, Sender, chat_key

log = logging.getLogger(__name__)

CHANNEL = "matrix"
# What a file message becomes for the media pipeline: a voice note or audio file is "voice", a picture "photo".
_FILE_KINDS: dict[str, AttachmentKind] = {"m.image": "photo", "m.file": "document", "m.audio": "voice", "m.video": "document"}
_TEXT_TYPES = frozenset({"m.text", "m.emote"})  # m.notice is what bots send: never answered, so bots cannot loop


@dataclass(frozen=True)
class Me:
    """Who the bot is, as far as addressing is concerned."""

    user_id: str
    display_name: str


@dataclass(frozen=True)
class Room:
    """What translating needs of a room: whether it is a DM, its name, its members' display names, its admins
    (power level 50 or more: they may stop others' work and /reset, as a Telegram group's admins may)."""

    room_id: str
    private: bool
    title: str | None
    names: dict[str, str]
    admins: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Replied:
    """The event a message replies to, as far as it could be looked up."""

    event_id: str
    sender: str
    text: str


def translate(
    event: object, room: Room, me: Me, replied: Replied | None = None, our_threads: Container[str] = ()
) -> Inbound | None:
    """One raw room event as an Inbound, or None for anything that is not a person's message (or is malformed).
    A message in a thread we answered in (`our_threads`) addresses us like a reply to us."""
    if not isinstance(event, dict) or event.get("type") != "m.room.message":
        return None
    event_id, sender, content = event.get("event_id"), event.get("sender"), event.get("content")
    if not isinstance(event_id, str) or not isinstance(sender, str) or not isinstance(content, dict):
        log.warning("skipping a malformed Matrix event in %s", room.room_id)
        return None
    if sender == me.user_id:
        return None
    relation = _dict(content.get("m.relates_to"))
    kind: InboundKind = "message"
    message_id = event_id
    if relation.get("rel_type") == "m.replace" and isinstance(relation.get("event_id"), str):
        # An edit: the new words replace those of the message it names (clients put them in m.new_content).
        kind, message_id = "edit", relation["event_id"]
        content = _dict(content.get("m.new_content")) or content
    msgtype = content.get("msgtype")
    body = _str(content.get("body"))
    refs = _attachment_refs(content, msgtype)
    if msgtype not in _TEXT_TYPES and not refs:
        return None
    text = "" if refs and body == _file_name(content) else _without_reply_fallback(body, relation)
    if not text and not refs:
        return None
    quoted = _quoted(replied, room, me)
    thread = thread_of(event_id, relation, room)
    in_our_thread = relation.get("rel_type") == "m.thread" and thread in our_threads
    return Inbound(
        channel=CHANNEL,
        chat=chat_key(CHANNEL, room.room_id),
        message_id=message_id,
        sender=Sender(id=sender, name=room.names.get(sender) or sender, is_admin=sender in room.admins),
        text=text,
        ts=_timestamp(event),
        kind=kind,
        chat_type="private" if room.private else "group",
        chat_title=None if room.private else room.title,
        reply_to=quoted,
        attachment_refs=tuple(refs),
        thread_id=thread,
        addressed=room.private or in_our_thread or (quoted is not None and quoted.from_bot) or is_mentioned(content, me),
        update_id=update_id(event_id),
        flags=("caption",) if refs and text else (),
    )


def is_mentioned(content: dict[str, Any], me: Me) -> bool:
    """Mentioned by id or display name in `body`, by a pill in `formatted_body`, or in `m.mentions` (which clients
    fill in for a pill); `formatted_body` is only searched, never rendered."""
    mentions = _dict(content.get("m.mentions")).get("user_ids")
    if isinstance(mentions, list) and me.user_id in mentions:
        return True
    body = _str(content.get("body"))
    if me.user_id.lower() in body.lower():
        return True
    if me.display_name and re.search(rf"(?<!\w){re.escape(me.display_name)}(?!\w)", body, re.IGNORECASE):
        return True
    formatted = content.get("formatted_body")
    return isinstance(formatted, str) and f"matrix.to/#/{me.user_id}".lower() in unquote(formatted).lower()


def thread_of(event_id: str, relation: dict[str, Any], room: Room) -> str | None:
    """Where the answer goes: the message's thread; in a room a message outside any thread starts one; none in a DM."""
    if relation.get("rel_type") == "m.thread" and isinstance(relation.get("event_id"), str):
        return str(relation["event_id"])
    return None if room.private else event_id


def replied_to(content: object) -> str | None:
    """The event a message really replies to (a thread's fallback reply is not one)."""
    relation = _dict(_dict(content).get("m.relates_to"))
    if relation.get("is_falling_back") is True:
        return None
    target = _dict(relation.get("m.in_reply_to")).get("event_id")
    return target if isinstance(target, str) else None


def update_id(event_id: str) -> int:
    """A stable number for an event id: the store refuses a second copy of the same event."""
    return int.from_bytes(hashlib.sha256(event_id.encode("utf-8")).digest()[:7], "big")


def _quoted(replied: Replied | None, room: Room, me: Me) -> Quoted | None:
    if replied is None:
        return None
    name = room.names.get(replied.sender) or replied.sender
    return Quoted(message_id=replied.event_id, sender_name=name, text=replied.text, from_bot=replied.sender == me.user_id)


def _attachment_refs(content: dict[str, Any], msgtype: object) -> list[AttachmentRef]:
    kind = _FILE_KINDS.get(msgtype) if isinstance(msgtype, str) else None
    url = content.get("url")
    if kind is None or not isinstance(url, str) or not url.startswith("mxc://"):
        return []
    info = _dict(content.get("info"))
    size = info.get("size")
    mime = info.get("mimetype")
    size = size if type(size) is int and size > 0 else 0
    return [AttachmentRef(kind, url, _file_name(content) or kind, size, mime if isinstance(mime, str) else None)]


def _file_name(content: dict[str, Any]) -> str:
    for key in ("filename", "body"):
        value = content.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return ""


def _without_reply_fallback(body: str, relation: dict[str, Any]) -> str:
    """Older clients quote the replied message in `body` as `> ` lines and a blank line: the quote is not their words."""
    if "m.in_reply_to" not in relation or not body.startswith("> "):
        return body
    lines = body.split("\n")
    for index, line in enumerate(lines):
        if not line.startswith(">"):
            return "\n".join(lines[index + 1 if line == "" else index :])
    return ""


def _timestamp(event: dict[str, Any]) -> float:
    ts = event.get("origin_server_ts")
    return ts / 1000 if isinstance(ts, int | float) and ts > 0 else time.time()


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
