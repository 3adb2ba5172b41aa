"""Raw callback_query updates → Inbound of kind "press"; malformed ones skipped with one warning; buttons survive the
outbox's JSON."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bicameral.channels.telegram.actions import inline_keyboard
from bicameral.channels.telegram.updates import BotIdentity, translate
from bicameral.events import Press, SendText
from bicameral.store.outbox import action_from_json, action_to_json

BOT = BotIdentity(id=777, username="bicameral_test_bot")
USER = {"id": 42, "is_bot": False, "first_name": "Alice", "username": "alice"}
GROUP = {"id": -100123, "type": "supergroup", "title": "Team"}
OURS = {"message_id": 9, "date": 1_700_000_000, "chat": GROUP, "from": {"id": 777, "is_bot": True, "first_name": "B"}}


def press(**fields: Any) -> dict[str, Any]:
    query = {"id": "4711", "from": USER, "message": OURS, "chat_instance": "1", "data": "q:abcdefghijkl:1", **fields}
    return {"update_id": 5, "callback_query": {k: v for k, v in query.items() if v is not None}}


def test_a_press_names_the_message_the_presser_and_the_data() -> None:
    inbound = translate(press(), BOT, "Bicameral")
    assert inbound is not None
    assert inbound.kind == "press" and inbound.press == Press(id="4711", data="q:abcdefghijkl:1")
    assert inbound.chat == "telegram:-100123" and inbound.message_id == "9" and inbound.chat_type == "supergroup"
    assert inbound.sender.id == "42" and inbound.sender.name == "Alice"
    assert inbound.addressed and inbound.text == "" and inbound.update_id == 5


def test_a_press_on_a_message_telegram_no_longer_shows_still_names_it() -> None:
    inaccessible = {"chat": GROUP, "message_id": 3, "date": 0}
    inbound = translate(press(message=inaccessible), BOT, "Bicameral")
    assert inbound is not None and inbound.message_id == "3"


@pytest.mark.parametrize(
    "fields",
    [
        {"from": None},  # no presser
        {"from": "alice"},
        {"id": 4711},  # the id must be a string
        {"data": 3},
        {"message": "9"},
        {"message": {"message_id": 9, "date": 1}},  # no chat
    ],
)
def test_a_malformed_press_is_skipped_with_a_warning(fields: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert translate(press(**fields), BOT, "Bicameral") is None
    assert "skipping malformed update 5" in caplog.text


@pytest.mark.parametrize("fields", [{"message": None}, {"data": None}])
def test_a_press_without_our_message_or_data_is_skipped(fields: dict[str, Any]) -> None:
    assert translate(press(**fields), BOT, "Bicameral") is None


def test_buttons_become_one_row_each_and_survive_the_outbox() -> None:
    buttons = (("Tea", "q:abcdefghijkl:0"), ("Coffee", "q:abcdefghijkl:1"))
    assert inline_keyboard(buttons) == {
        "inline_keyboard": [
            [{"text": "Tea", "callback_data": "q:abcdefghijkl:0"}],
            [{"text": "Coffee", "callback_data": "q:abcdefghijkl:1"}],
        ]
    }
    assert inline_keyboard(()) is None
    action = SendText(chat="telegram:1", text="Tea or coffee?", buttons=buttons, audience=("telegram:1",))
    assert action_from_json(action_to_json(action)) == action
