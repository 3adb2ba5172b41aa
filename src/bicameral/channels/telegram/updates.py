"""Translating raw Telegram update dicts into Inbound values; files travel as references, not downloaded here."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass

from bicameral.events import AttachmentRef, ChatType, Inbound, InboundKind, Press, Quoted, Sender, chat_key

from .wire import CallbackQuery, Malformed, Message, Update, User, read_update

log = logging.getLogger(__name__)

CHANNEL = "telegram"
_CHAT_TYPES: frozenset[str] = frozenset({"private", "group", "supergroup", "channel"})


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is, as far as addressing is concerned."""

    id: int
    username: str


def translate(update: object, bot: BotIdentity, bot_name: str) -> Inbound | None:
    """One raw update as an Inbound, or None for malformed or content-free updates; `bot_name` addresses the bot."""
    parsed = parse_update(update)
    if parsed is None:
        return None
    if parsed.callback_query is not None:
        return _press(parsed.update_id, parsed.callback_query, now=time.time())
    message, kind = _message_of(parsed)
    if message is None:
        _skip(parsed.update_id, "no message, edited_message or callback_query")
        return None
    refs = attachment_refs(message)
    text = message.text or message.caption or ""
    if not text and not refs:
        log.debug("ignoring update %s: no text, caption or file", parsed.update_id)
        return None

    return Inbound(
        channel=CHANNEL,
        chat=chat_key(CHANNEL, message.chat.id),
        message_id=str(message.message_id),
        sender=_sender(message),
        text=text,
        ts=_timestamp(message, kind),
        kind=kind,
        chat_type=_chat_type(message.chat.type),
        chat_title=message.chat.title,
        reply_to=_quoted(message, bot),
        attachment_refs=tuple(refs),
        thread_id=_thread_id(message),
        addressed=is_addressed(message, bot, bot_name),
        update_id=parsed.update_id,
        media_group_id=message.media_group_id,
        flags=_origin_flags(message),
    )


def _press(update_id: int, query: CallbackQuery, *, now: float) -> Inbound | None:
    """A button press as an Inbound of kind "press": on which of our messages, by whom, with what data."""
    message = query.message
    if message is None or query.data is None:
        # An inline-mode message or a game: nothing of ours. The channel still answers it.
        _skip(update_id, "callback_query without a message or data")
        return None
    user = query.from_user
    return Inbound(
        channel=CHANNEL,
        chat=chat_key(CHANNEL, message.chat.id),
        message_id=str(message.message_id),
        sender=Sender(id=str(user.id), name=_display_name(user), username=user.username, is_bot=user.is_bot),
        text="",
        ts=now,
        kind="press",
        chat_type=_chat_type(message.chat.type),
        chat_title=message.chat.title,
        thread_id=_thread_id(message),
        addressed=True,
        update_id=update_id,
        press=Press(id=query.id, data=query.data),
    )


def parse_update(update: object) -> Update | None:
    """Read a raw update dict, with its strings repaired; log one warning and return None when it is malformed."""
    try:
        return read_update(update)
    except Malformed as exc:
        update_id = update.get("update_id", "?") if isinstance(update, dict) else "?"
        _skip(update_id, str(exc))
    return None


def is_addressed(message: Message, bot: BotIdentity, bot_name: str) -> bool:
    """Private chats always; groups when mentioned, replied to, named, or commanded."""
    if message.chat.type == "private":
        return True
    reply = message.reply_to_message
    if reply and reply.from_user and reply.from_user.id == bot.id and not _is_topic_root(message):
        return True
    text = message.text or message.caption or ""
    for entity in message.entities or message.caption_entities or ():
        if entity.type == "text_mention" and entity.user and entity.user.id == bot.id:
            return True
    if bot.username and re.search(rf"@{re.escape(bot.username)}(?!\w)", text, re.IGNORECASE):
        return True
    if bot_name and re.search(rf"(?<!\w){re.escape(bot_name)}(?!\w)", text, re.IGNORECASE):
        return True
    return _is_command_for(text, bot)


def attachment_refs(message: Message) -> list[AttachmentRef]:
    """The files on a message worth downloading: the largest photo size, any document, voice note or audio file."""
    refs: list[AttachmentRef] = []
    if message.photo:
        best = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        refs.append(AttachmentRef("photo", best.file_id, "photo.jpg", best.file_size or 0, "image/jpeg"))
    if message.document:
        doc = message.document
        refs.append(AttachmentRef("document", doc.file_id, doc.file_name or "document", doc.file_size or 0, doc.mime_type))
    if message.voice:
        voice = message.voice
        refs.append(AttachmentRef("voice", voice.file_id, "voice.ogg", voice.file_size or 0, voice.mime_type or "audio/ogg"))
    if message.audio:
        audio = message.audio
        refs.append(AttachmentRef("voice", audio.file_id, audio.file_name or "audio", audio.file_size or 0, audio.mime_type))
    return refs


# --- private helpers ---


def _message_of(update: Update) -> tuple[Message | None, InboundKind]:
    if update.message is not None:
        return update.message, "message"
    if update.edited_message is not None:
        return update.edited_message, "edit"
    return None, "message"


def _sender(message: Message) -> Sender:
    if message.from_user is not None:
        return Sender(
            id=str(message.from_user.id),
            name=_display_name(message.from_user),
            username=message.from_user.username,
            is_bot=message.from_user.is_bot,
        )
    # Anonymous group admins and linked channels post as a chat, not a user.
    if message.sender_chat is not None:
        chat = message.sender_chat
        return Sender(id=str(chat.id), name=chat.title or chat.username or str(chat.id), username=chat.username)
    return Sender(id="unknown", name="unknown")


def _display_name(user: User) -> str:
    return f"{user.first_name} {user.last_name}" if user.last_name else user.first_name


def _quoted(message: Message, bot: BotIdentity) -> Quoted | None:
    reply = message.reply_to_message
    if reply is None or _is_topic_root(message):
        return None
    if reply.from_user is not None:
        name = _display_name(reply.from_user)
    elif reply.sender_chat is not None:
        name = reply.sender_chat.title or str(reply.sender_chat.id)
    else:
        name = "unknown"
    return Quoted(
        message_id=str(reply.message_id),
        sender_name=name,
        text=reply.text or reply.caption or "",
        from_bot=bool(reply.from_user and reply.from_user.id == bot.id),
    )


def _is_topic_root(message: Message) -> bool:
    # In forum topics Telegram fills reply_to_message with the topic's opening message even
    # when the user did not reply to anything; that is not a real reply.
    reply = message.reply_to_message
    return bool(
        message.is_topic_message
        and reply is not None
        and reply.message_id == message.message_thread_id
        and reply.forum_topic_created
    )


def _origin_flags(message: Message) -> tuple[str, ...]:
    """Words the sender did not type just now: forwarded from someone, or a file's caption."""
    flags = ("forwarded",) if message.forwarded else ()
    return flags + (("caption",) if not message.text and message.caption else ())


def _thread_id(message: Message) -> str | None:
    # Only forum topics are real threads: sending into a plain reply chain's thread id fails.
    if message.is_topic_message and message.message_thread_id is not None:
        return str(message.message_thread_id)
    return None


def _is_command_for(text: str, bot: BotIdentity) -> bool:
    if not text.startswith("/"):
        return False
    head = text.split(maxsplit=1)[0][1:]
    command, at, target = head.partition("@")
    if not command:
        return False
    return not at or target.lower() == bot.username.lower()


def _chat_type(value: str) -> ChatType:
    return value if value in _CHAT_TYPES else "group"  # type: ignore[return-value]


def _timestamp(message: Message, kind: InboundKind) -> float:
    return float(message.edit_date if kind == "edit" and message.edit_date else message.date)


def _skip(update_id: object, reason: str) -> None:
    log.warning("skipping malformed update %s: %s", update_id, reason)
