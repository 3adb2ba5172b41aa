"""Performing Actions in Matrix rooms: messages in threads as Matrix HTML, edits, redactions, files, typing."""

from __future__ import annotations

import logging
import mimetypes
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nio import Api, AsyncClient, ErrorResponse, RoomCreateResponse, RoomSendResponse, UploadResponse

from bicameral.events import (
    Action,
    ActionResult,
    AnswerPress,
    DeleteMessage,
    EditText,
    React,
    SendFile,
    SendText,
    Typing,
    split_chat_key,
)
from bicameral.folders import resolve_under

from .directs import dm_partner, find_direct, joined_rooms
from .format import text_content

log = logging.getLogger(__name__)

MAX_TEXT = 16000  # characters of one message; Matrix caps an event at 64 KiB, and HTML beside the body doubles it
TYPING_MS = 10000
RETRY_FLOOR = 1.0


class ActionPerformer:
    """Carries out one Action through the client; failures come back in the result, never raised."""

    def __init__(self, client: AsyncClient, *, data_dir: Path, redact: Callable[[str], str]) -> None:
        self._client = client
        self._data_dir = data_dir
        self._redact = redact
        self.sent: set[str] = set()  # event ids of our messages in this process (a reply to one addresses us)
        self._direct: dict[str, str] = {}  # user id → our DM room with them
        self.threads: set[str] = set()  # threads we answered in (by root): a message there addresses us
        # A worker that sends without syncing has no room list (`client.rooms` stays empty): it asks the homeserver
        # which rooms are DMs, once per room (at its start, and at its first action in a room it did not know), and
        # keeps the answer: room → the person it is a DM with, or None.
        self.syncing = True
        self._partners: dict[str, str | None] = {}

    async def perform(self, action: Action) -> ActionResult:
        room = split_chat_key(action.chat)[1]
        try:
            if room.startswith("@"):  # a person (the owner), not a room: their DM with us
                room = await self._direct_room(room)
            elif not self.syncing and room not in self._partners:
                await self._learn_quietly(room)
            if isinstance(action, SendText):
                return await self._send_text(room, action)
            if isinstance(action, EditText):
                content = text_content(action.text)
                edit = {**content, "body": f"* {action.text}", "m.new_content": content,
                        "m.relates_to": {"rel_type": "m.replace", "event_id": action.message_id}}
                return await self._put(room, edit, "m.room.message")
            if isinstance(action, DeleteMessage):
                redacted = await self._client.room_redact(room, action.message_id)
                return self._result(redacted, action.message_id)
            if isinstance(action, React):
                relates = {"rel_type": "m.annotation", "event_id": action.message_id, "key": action.emoji}
                return await self._put(room, {"m.relates_to": relates}, "m.reaction")
            if isinstance(action, Typing):
                typing = await self._client.room_typing(room, True, timeout=TYPING_MS)
                return self._result(typing, None)
            if isinstance(action, SendFile):
                return await self._send_file(room, action)
            if isinstance(action, AnswerPress):
                return ActionResult(ok=True)  # no buttons here: a choice arrives as a typed number or words
        except Exception as exc:  # a network error, a closed session: the outbox retries what it keeps
            return ActionResult.failed(self._redact(f"Matrix {type(action).__name__} failed: {type(exc).__name__}: {exc}"))
        return ActionResult.failed(f"Matrix cannot do {type(action).__name__}")

    async def _direct_room(self, user: str) -> str:
        """Our DM with `user`: a room of just the two of us, found among our rooms or opened (and remembered)."""
        if user in self._direct:
            return self._direct[user]
        for room_id in self._client.rooms:
            if self.is_direct_with(room_id, user):
                self._direct[user] = room_id
                return str(room_id)
        if not self.syncing:  # no room list here: the homeserver is asked (a failure fails the send, tried again)
            found = await find_direct(self._client, user)
            if found is not None:
                self._partners[found] = user
                return self._direct.setdefault(user, found)
        made = await self._client.room_create(is_direct=True, invite=[user])
        if not isinstance(made, RoomCreateResponse):
            raise OSError(f"could not open a DM with {user}: {getattr(made, 'message', made)}")
        self._direct[user] = made.room_id
        self._partners[made.room_id] = user
        return str(made.room_id)

    def is_direct_with(self, room_id: str, user: str) -> bool:
        """Whether this room is a DM with `user`: just the two of us in an unnamed room that was not upgraded away
        (without a sync: as the homeserver said when this worker last looked, at its start or its first send there)."""
        if not self.syncing:
            return self._partners.get(room_id) == user
        room = self._client.rooms.get(room_id)
        return (room is not None and user in room.users and room.member_count == 2 and room.is_group
                and not room.replacement_room)

    async def learn_direct(self, room_id: str) -> None:
        """Without a sync: whether `room_id` is a DM, asked of the homeserver (the first one found per person kept)."""
        user = await dm_partner(self._client, room_id)
        self._partners[room_id] = user
        if user is not None:
            self._direct.setdefault(user, room_id)

    async def _learn_quietly(self, room_id: str) -> None:
        """Whether a room is a DM only informs `is_direct_with`: a failure to learn it must not fail the action."""
        try:
            await self.learn_direct(room_id)
        except Exception as exc:  # tried again at the next action there
            log.info("matrix: could not tell whether %s is a DM: %s", room_id, self._redact(f"{type(exc).__name__}: {exc}"))

    async def learn_directs(self) -> None:
        """Without a sync: which rooms we are in are DMs, so that `is_direct_with` knows them before any send there."""
        for room_id in await joined_rooms(self._client):
            if room_id not in self._partners:
                await self.learn_direct(room_id)

    async def _send_text(self, room: str, action: SendText) -> ActionResult:
        text = action.text
        if action.buttons:  # no buttons on Matrix: the choices are numbered, and typing one answers
            text += "\n\n" + "\n".join(f"{n}. {label}" for n, (label, _) in enumerate(action.buttons, 1))
        parts = [text[i : i + MAX_TEXT] for i in range(0, len(text), MAX_TEXT)] or [""]
        sent = list(action.sent_parts)
        for index, part in enumerate(parts[len(sent) :], len(sent)):
            content = text_content(part, "m.notice" if action.purpose in ("notice", "status") else "m.text")
            content["m.relates_to"] = relation(action.thread_id, action.reply_to if index == 0 else None)
            result = await self._put(room, content, "m.room.message")
            if not result.ok:
                return ActionResult(ok=False, message_ids=tuple(sent), error=result.error, retry_after=result.retry_after)
            sent += result.message_ids
        if action.thread_id:
            self.threads.add(action.thread_id)
        return ActionResult(ok=True, message_ids=tuple(sent))

    async def _send_file(self, room: str, action: SendFile) -> ActionResult:
        path = resolve_under(self._data_dir, self._data_dir / action.path)
        if path is None or not path.is_file():
            return ActionResult.failed(f"no such file to send: {action.path}")
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        size = path.stat().st_size
        with path.open("rb") as file:
            uploaded, _ = await self._client.upload(file, content_type=mime, filename=path.name, filesize=size)
        if not isinstance(uploaded, UploadResponse):
            return self._result(uploaded, None)
        msgtype = "m.image" if action.kind == "photo" and mime.startswith("image/") else "m.file"
        content: dict[str, Any] = {"msgtype": msgtype, "body": action.caption or path.name, "filename": path.name,
                                   "url": uploaded.content_uri, "info": {"mimetype": mime, "size": size}}
        content["m.relates_to"] = relation(action.thread_id, action.reply_to)
        return await self._put(room, content, "m.room.message")

    async def _put(self, room: str, content: dict[str, Any], event_type: str) -> ActionResult:
        """Send one event as it is: never through the client's encryption (encrypted rooms are refused)."""
        if not content.get("m.relates_to"):
            content.pop("m.relates_to", None)
        token = self._client.access_token
        method, path, data = Api.room_send(token, room, event_type, content, str(uuid.uuid4()))
        answer = await self._client._send(RoomSendResponse, method, path, data, (room,))
        result = self._result(answer, getattr(answer, "event_id", None))
        if result.ok:
            self.sent.update(result.message_ids)
        return result

    def _result(self, answer: object, made: str | None) -> ActionResult:
        if isinstance(answer, ErrorResponse):
            wait = answer.retry_after_ms / 1000 if answer.retry_after_ms else None
            error = self._redact(f"Matrix refused: {answer.status_code or ''} {answer.message or ''}".strip())
            return ActionResult(ok=False, error=error, retry_after=max(wait, RETRY_FLOOR) if wait else None)
        return ActionResult(ok=True, message_ids=(made,) if made else ())


def relation(thread_id: str | None, reply_to: str | None) -> dict[str, Any]:
    """Inside the thread, with the reply fallback that clients without threads show; or a plain reply; or nothing."""
    if thread_id:
        return {"rel_type": "m.thread", "event_id": thread_id, "is_falling_back": reply_to is None,
                "m.in_reply_to": {"event_id": reply_to or thread_id}}
    if reply_to:
        return {"m.in_reply_to": {"event_id": reply_to}}
    return {}
