"""Raw Telegram update dicts → Inbound: addressing, quotes, files, threads, and malformed input skipped."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from bicameral.channels.telegram.updates import BotIdentity, translate
from bicameral.config import Settings
from bicameral.events import AttachmentRef, Inbound

BOT = BotIdentity(id=777, username="bicameral_test_bot")
USER = {"id": 42, "is_bot": False, "first_name": "Alice", "last_name": "Liddell", "username": "alice"}
BOT_USER = {"id": BOT.id, "is_bot": True, "first_name": "Bicameral", "username": BOT.username}
DM_CHAT = {"id": 42, "type": "private", "first_name": "Alice"}
GROUP_CHAT = {"id": -100123, "type": "supergroup", "title": "Team", "is_forum": True}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.for_test(tmp_path)


def message(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"message_id": 10, "date": 1_700_000_000, "chat": DM_CHAT, "from": USER, "text": "hello"}
    return {**base, **fields}


def group_message(**fields: Any) -> dict[str, Any]:
    return message(chat=GROUP_CHAT, **fields)


def update(msg: dict[str, Any], key: str = "message") -> dict[str, Any]:
    return {"update_id": 1, key: msg}


def one(raw: Any, settings: Settings) -> Inbound:
    inbound = translate(raw, BOT, settings.bot_name)
    assert inbound is not None
    return inbound


# --- translation ---


def test_a_dm_becomes_an_addressed_inbound(settings: Settings) -> None:
    inbound = one(update(message()), settings)
    assert (inbound.channel, inbound.chat, inbound.message_id, inbound.update_id) == ("telegram", "telegram:42", "10", 1)
    assert (inbound.text, inbound.kind, inbound.chat_type, inbound.addressed) == ("hello", "message", "private", True)
    assert inbound.ts == 1_700_000_000.0
    assert (inbound.sender.id, inbound.sender.name, inbound.sender.username) == ("42", "Alice Liddell", "alice")
    assert inbound.sender.is_bot is False
    assert inbound.reply_to is None and inbound.thread_id is None and inbound.attachment_refs == ()


def test_an_edit_carries_its_edit_time(settings: Settings) -> None:
    inbound = one(update(message(text="fixed", edit_date=1_700_000_060), "edited_message"), settings)
    assert (inbound.kind, inbound.text, inbound.ts) == ("edit", "fixed", 1_700_000_060.0)


def test_a_post_as_a_chat_is_named_after_the_chat(settings: Settings) -> None:
    raw = group_message(sender_chat={"id": -100999, "type": "channel", "title": "News"})
    del raw["from"]
    sender = one(update(raw), settings).sender
    assert (sender.id, sender.name) == ("-100999", "News")


@pytest.mark.parametrize(
    ("fields", "addressed"),
    [
        ({"text": "just chatting"}, False),
        ({"text": "hey @Bicameral_Test_Bot what's up"}, True),
        ({"text": "hey @bicameral_test_bot_two"}, False),
        ({"text": "Bicameral, what time is it?"}, True),
        ({"text": "bicameralism is a theory"}, False),
        ({"text": "/help"}, True),
        ({"text": "/help@bicameral_test_bot now"}, True),
        ({"text": "/help@some_other_bot"}, False),
        ({"text": "you there?", "entities": [{"type": "text_mention", "offset": 0, "length": 3, "user": BOT_USER}]}, True),
        ({"text": "you there?", "entities": [{"type": "text_mention", "offset": 0, "length": 3, "user": USER}]}, False),
        ({"text": None, "caption": "look @bicameral_test_bot", "photo": [{"file_id": "p", "width": 1, "height": 1}]}, True),
        ({"text": "agreed", "reply_to_message": message(message_id=5, **{"from": BOT_USER}, text="I am here")}, True),
        ({"text": "agreed", "reply_to_message": message(message_id=5, text="mine")}, False),
    ],
)
def test_group_addressing(settings: Settings, fields: dict[str, Any], addressed: bool) -> None:
    raw = group_message(**fields)
    if raw["text"] is None:
        del raw["text"]
    assert one(update(raw), settings).addressed is addressed


def test_a_reply_carries_its_referent(settings: Settings) -> None:
    replied = message(message_id=5, **{"from": BOT_USER}, text="I am here")
    quoted = one(update(message(reply_to_message=replied)), settings).reply_to
    assert quoted is not None
    assert (quoted.message_id, quoted.sender_name, quoted.text, quoted.from_bot) == ("5", "Bicameral", "I am here", True)


def test_a_topic_root_is_neither_a_reply_nor_addressing(settings: Settings) -> None:
    root = message(message_id=7, chat=GROUP_CHAT, **{"from": BOT_USER}, forum_topic_created={"name": "Plans", "icon_color": 1})
    del root["text"]
    raw = group_message(text="in the topic", message_thread_id=7, is_topic_message=True, reply_to_message=root)
    inbound = one(update(raw), settings)
    assert (inbound.reply_to, inbound.addressed, inbound.thread_id) == (None, False, "7")


def test_a_reply_inside_a_topic_is_a_reply(settings: Settings) -> None:
    replied = message(message_id=8, chat=GROUP_CHAT, **{"from": BOT_USER}, text="earlier answer")
    raw = group_message(text="about that", message_thread_id=7, is_topic_message=True, reply_to_message=replied)
    inbound = one(update(raw), settings)
    assert inbound.reply_to is not None and inbound.reply_to.message_id == "8"
    assert inbound.addressed is True and inbound.thread_id == "7"


def test_a_plain_reply_chain_is_no_thread(settings: Settings) -> None:
    assert one(update(group_message(message_thread_id=7)), settings).thread_id is None


def test_the_largest_photo_and_a_document_become_references(settings: Settings) -> None:
    photos = [
        {"file_id": "small", "width": 90, "height": 60, "file_size": 100},
        {"file_id": "large", "width": 900, "height": 600, "file_size": 9000},
        {"file_id": "medium", "width": 300, "height": 200},
    ]
    raw = message(photo=photos, caption="both", media_group_id="album-1")
    del raw["text"]
    inbound = one(update(raw), settings)
    assert inbound.attachment_refs == (AttachmentRef("photo", "large", "photo.jpg", 9000, "image/jpeg"),)
    assert (inbound.text, inbound.media_group_id) == ("both", "album-1")

    raw = message(document={"file_id": "d", "file_unique_id": "u"})
    del raw["text"]
    inbound = one(update(raw), settings)
    assert inbound.attachment_refs == (AttachmentRef("document", "d", "document", 0, None),)
    assert inbound.text == ""


def test_lone_surrogates_are_repaired_everywhere_they_are_read(settings: Settings) -> None:
    # Through JSON, as from the wire: json.loads joins the escaped pair and leaves the lone halves alone.
    raw = json.loads(json.dumps(message(
        text="caf\udc00e \ud83d\ude00",
        **{"from": {**USER, "first_name": "A\ud800", "last_name": None}},
        reply_to_message=message(message_id=3, text="\udfff"),
    )))
    inbound = one(update(raw), settings)
    assert inbound.text == "caf\ufffde \U0001f600"
    assert inbound.sender.name == "A\ufffd"
    assert inbound.reply_to is not None and inbound.reply_to.text == "\ufffd"


def test_content_free_messages_are_ignored_quietly(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    raw = message(sticker={"file_id": "s", "type": "regular"})
    del raw["text"]
    assert translate(update(raw), BOT, settings.bot_name) is None
    assert caplog.records == []


# --- malformed input: skipped with one warning, never raised ---


def _broken(path: str, value: Any) -> dict[str, Any]:
    """A valid group update with the field at the dotted `path` set to `value`, or removed if `value` is ..."""
    raw = update(
        group_message(
            entities=[{"type": "bold", "offset": 0, "length": 1}],
            reply_to_message=message(message_id=5, **{"from": BOT_USER}, text="I am here"),
            photo=[{"file_id": "p", "width": 2, "height": 2}],
            document={"file_id": "d"},
            sender_chat={"id": -5, "type": "channel"},
        )
    )
    raw = copy.deepcopy(raw)
    *parents, last = path.split(".")
    target: Any = raw
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if value is ...:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return raw


MALFORMED = [
    ("update_id", ...),
    ("update_id", "1"),
    ("update_id", True),
    ("message", "hello"),
    ("message.message_id", ...),
    ("message.message_id", "10"),
    ("message.message_id", True),
    ("message.date", ...),
    ("message.date", 1.5),
    ("message.chat", ...),
    ("message.chat", [1]),
    ("message.chat.id", ...),
    ("message.chat.id", "-100123"),
    ("message.chat.type", ...),
    ("message.chat.type", 1),
    ("message.chat.title", 5),
    ("message.from", "Alice"),
    ("message.from.id", None),
    ("message.from.id", 4.2),
    ("message.from.first_name", ...),
    ("message.from.first_name", ["A"]),
    ("message.from.last_name", 0),
    ("message.from.username", 0),
    ("message.from.is_bot", "no"),
    ("message.sender_chat", 1),
    ("message.sender_chat.id", "x"),
    ("message.text", 3),
    ("message.caption", {"text": "x"}),
    ("message.entities", "bold"),
    ("message.entities.0", "bold"),
    ("message.entities.0.type", ...),
    ("message.entities.0.user", 777),
    ("message.photo", {"file_id": "p"}),
    ("message.photo.0", "p"),
    ("message.photo.0.file_id", ...),
    ("message.photo.0.width", "2"),
    ("message.photo.0.file_size", "big"),
    ("message.document", "d"),
    ("message.document.file_id", 1),
    ("message.document.file_name", 1),
    ("message.document.file_size", "1"),
    ("message.document.mime_type", False),
    ("message.reply_to_message", "earlier"),
    ("message.reply_to_message.message_id", ...),
    ("message.reply_to_message.from.id", "777"),
    ("message.reply_to_message.text", 1),
    ("message.media_group_id", 12),
    ("message.message_thread_id", "7"),
    ("message.is_topic_message", 1),
    ("message.forum_topic_created", True),
    ("message.edit_date", "yesterday"),
]


@pytest.mark.parametrize(("path", "value"), MALFORMED, ids=[f"{p}={v!r}" for p, v in MALFORMED])
def test_a_malformed_field_skips_the_update_with_one_warning(
    settings: Settings, caplog: pytest.LogCaptureFixture, path: str, value: Any
) -> None:
    assert translate(_broken("message.text", "valid"), BOT, settings.bot_name) is not None  # the base update is fine
    caplog.set_level(logging.WARNING)
    assert translate(_broken(path, value), BOT, settings.bot_name) is None
    [record] = caplog.records
    assert record.getMessage().startswith("skipping malformed update ")


def test_the_warning_names_the_field(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    assert translate(_broken("message.chat.id", "-100123"), BOT, settings.bot_name) is None
    [record] = caplog.records
    assert record.getMessage() == "skipping malformed update 1: update.message.chat.id: expected an integer, got str"


@pytest.mark.parametrize("raw", [None, "update", 7, [{"update_id": 1}], {"update_id": 2}, {"update_id": 3, "message": None}])
def test_updates_without_a_message_object_are_skipped_with_one_warning(
    settings: Settings, caplog: pytest.LogCaptureFixture, raw: Any
) -> None:
    caplog.set_level(logging.WARNING)
    assert translate(raw, BOT, settings.bot_name) is None
    [record] = caplog.records
    assert record.getMessage().startswith("skipping malformed update ")
