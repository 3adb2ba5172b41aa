"""Raw Bot API update JSON read into small typed values; a field we use that has the wrong type is refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
JSONObject = dict[str, Any]

# JSON may escape half of a surrogate pair on its own; json.loads joins real pairs, so any surrogate
# left in a string is a lone half that UTF-8, and so the store, cannot encode.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_KIND_NAMES: dict[type, str] = {int: "an integer", str: "a string", bool: "a boolean", dict: "an object", list: "an array"}


class Malformed(ValueError):
    """A field of a raw update is missing or has the wrong type."""


@dataclass(frozen=True, slots=True)
class User:
    id: int
    first_name: str
    is_bot: bool = False
    last_name: str | None = None
    username: str | None = None


@dataclass(frozen=True, slots=True)
class Chat:
    id: int
    type: str
    title: str | None = None
    username: str | None = None


@dataclass(frozen=True, slots=True)
class Entity:
    type: str
    user: User | None = None  # only on text_mention


@dataclass(frozen=True, slots=True)
class PhotoSize:
    file_id: str
    width: int
    height: int
    file_size: int | None = None


@dataclass(frozen=True, slots=True)
class Document:
    file_id: str
    file_name: str | None = None
    file_size: int | None = None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """The fields of a Bot API Message that intake reads."""

    message_id: int
    date: int
    chat: Chat
    from_user: User | None = None
    sender_chat: Chat | None = None
    text: str | None = None
    caption: str | None = None
    entities: tuple[Entity, ...] = ()
    caption_entities: tuple[Entity, ...] = ()
    photo: tuple[PhotoSize, ...] = ()
    document: Document | None = None
    # A voice note and an audio file carry the same fields a document does (a voice note has no name).
    voice: Document | None = None
    audio: Document | None = None
    reply_to_message: Message | None = None
    media_group_id: str | None = None
    message_thread_id: int | None = None
    is_topic_message: bool = False
    forum_topic_created: bool = False  # only whether the field is there: its content does not matter here
    edit_date: int | None = None
    forwarded: bool = False  # `forward_origin` (or the older `forward_date`) is there: someone else's words


@dataclass(frozen=True, slots=True)
class CallbackQuery:
    """A press on an inline button: who pressed, on which of our messages (absent when too old), with what data."""

    id: str
    from_user: User
    message: Message | None = None
    data: str | None = None


@dataclass(frozen=True, slots=True)
class Update:
    update_id: int
    message: Message | None = None
    edited_message: Message | None = None
    callback_query: CallbackQuery | None = None


def read_update(raw: object) -> Update:
    """`raw` as an Update; raises Malformed naming the first field that is missing or of the wrong type."""
    data = _as_object(raw, "update")
    return Update(
        update_id=_required(data, "update_id", int, "update"),
        message=_nested(data, "message", _message, "update"),
        edited_message=_nested(data, "edited_message", _message, "update"),
        callback_query=_nested(data, "callback_query", _callback_query, "update"),
    )


def repaired(text: str) -> str:
    """`text` made encodable: each lone surrogate becomes U+FFFD, nothing is refused."""
    return _LONE_SURROGATE.sub("\ufffd", text)


# --- one reader per type ---


def _message(data: JSONObject, where: str) -> Message:
    return Message(
        message_id=_required(data, "message_id", int, where),
        date=_required(data, "date", int, where),
        chat=_chat(_required(data, "chat", dict, where), f"{where}.chat"),
        from_user=_nested(data, "from", _user, where),
        sender_chat=_nested(data, "sender_chat", _chat, where),
        text=_string(data, "text", where),
        caption=_string(data, "caption", where),
        entities=_entities(data, "entities", where),
        caption_entities=_entities(data, "caption_entities", where),
        photo=tuple(_photo_size(item, path) for item, path in _objects(data, "photo", where)),
        document=_nested(data, "document", _document, where),
        voice=_nested(data, "voice", _document, where),
        audio=_nested(data, "audio", _document, where),
        reply_to_message=_nested(data, "reply_to_message", _message, where),
        media_group_id=_string(data, "media_group_id", where),
        message_thread_id=_optional(data, "message_thread_id", int, where),
        is_topic_message=_optional(data, "is_topic_message", bool, where) or False,
        forum_topic_created=_optional(data, "forum_topic_created", dict, where) is not None,
        forwarded=data.get("forward_origin") is not None or data.get("forward_date") is not None,
        edit_date=_optional(data, "edit_date", int, where),
    )


def _callback_query(data: JSONObject, where: str) -> CallbackQuery:
    return CallbackQuery(
        id=_required_string(data, "id", where),
        from_user=_user(_required(data, "from", dict, where), f"{where}.from"),
        # An old message Telegram no longer shows the bot comes as an InaccessibleMessage: chat, id and a zero date.
        message=_nested(data, "message", _message, where),
        data=_string(data, "data", where),
    )


def _user(data: JSONObject, where: str) -> User:
    return User(
        id=_required(data, "id", int, where),
        first_name=_required_string(data, "first_name", where),
        is_bot=_optional(data, "is_bot", bool, where) or False,
        last_name=_string(data, "last_name", where),
        username=_string(data, "username", where),
    )


def _chat(data: JSONObject, where: str) -> Chat:
    return Chat(
        id=_required(data, "id", int, where),
        type=_required_string(data, "type", where),
        title=_string(data, "title", where),
        username=_string(data, "username", where),
    )


def _entities(data: JSONObject, key: str, where: str) -> tuple[Entity, ...]:
    return tuple(
        Entity(type=_required_string(item, "type", path), user=_nested(item, "user", _user, path))
        for item, path in _objects(data, key, where)
    )


def _photo_size(data: JSONObject, where: str) -> PhotoSize:
    return PhotoSize(
        file_id=_required_string(data, "file_id", where),
        width=_required(data, "width", int, where),
        height=_required(data, "height", int, where),
        file_size=_optional(data, "file_size", int, where),
    )


def _document(data: JSONObject, where: str) -> Document:
    return Document(
        file_id=_required_string(data, "file_id", where),
        file_name=_string(data, "file_name", where),
        file_size=_optional(data, "file_size", int, where),
        mime_type=_string(data, "mime_type", where),
    )


# --- typed field access ---


def _optional(data: JSONObject, key: str, kind: type[T], where: str) -> T | None:
    """The field, None when absent or null; Malformed when it holds another type."""
    value = data.get(key)
    if value is None:
        return None
    # Python counts a bool as an int; JSON does not.
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise Malformed(f"{where}.{key}: expected {_KIND_NAMES.get(kind, kind.__name__)}, got {type(value).__name__}")


def _required(data: JSONObject, key: str, kind: type[T], where: str) -> T:
    value = _optional(data, key, kind, where)
    if value is None:
        raise Malformed(f"{where}.{key} is missing")
    return value


def _nested(data: JSONObject, key: str, read: Callable[[JSONObject, str], T], where: str) -> T | None:
    """An object field read by `read`, None when absent or null."""
    value = _optional(data, key, dict, where)
    return None if value is None else read(value, f"{where}.{key}")


def _string(data: JSONObject, key: str, where: str) -> str | None:
    """A string field, repaired: every string read here may end up in the store."""
    value = _optional(data, key, str, where)
    return None if value is None else repaired(value)


def _required_string(data: JSONObject, key: str, where: str) -> str:
    return repaired(_required(data, key, str, where))


def _objects(data: JSONObject, key: str, where: str) -> list[tuple[JSONObject, str]]:
    """The objects of an array field, each with its path for error messages; absent means empty."""
    items = _optional(data, key, list, where) or []
    return [(_as_object(item, f"{where}.{key}[{index}]"), f"{where}.{key}[{index}]") for index, item in enumerate(items)]


def _as_object(value: object, where: str) -> JSONObject:
    if not isinstance(value, dict):
        raise Malformed(f"{where}: expected an object, got {type(value).__name__}")
    return value
