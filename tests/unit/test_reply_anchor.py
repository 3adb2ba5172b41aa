"""What a turn's answer replies to: the last message a person sent in a group; nothing in a DM or to a fire."""

from __future__ import annotations

from bicameral.events import ActionResult, Inbound, Sender
from bicameral.turns.turn import Turn

GROUP = "telegram:-100470"


def _message(message_id: str, *, chat_type: str = "supergroup", kind: str = "message") -> Inbound:
    return Inbound(
        channel="telegram", chat=GROUP, message_id=message_id, sender=Sender(id="2001", name="Ann"),
        text="hello", ts=0.0, kind=kind, chat_type=chat_type,  # type: ignore[arg-type]
    )


def _fire(n: int = 1, *, chat_type: str = "supergroup") -> Inbound:
    return _message(f"schedule-3-fire-{n}", chat_type=chat_type, kind="synthetic")


def _anchor(*batch: Inbound) -> str | None:
    async def perform(action: object) -> ActionResult:
        return ActionResult(ok=True)

    return Turn(chat=GROUP, turn_id="t1", batch=list(batch), perform=perform, drain_injected=list).reply_anchor


def test_a_group_answer_quotes_the_last_message_a_person_sent() -> None:
    assert _anchor(_message("41"), _message("42")) == "42"


def test_a_fired_schedule_is_nothing_to_reply_to() -> None:
    assert _anchor(_fire()) is None
    assert _anchor(_fire(1), _fire(2)) is None


def test_a_person_in_the_same_burst_as_a_fire_is_still_quoted() -> None:
    assert _anchor(_message("42"), _fire()) == "42"
    assert _anchor(_fire(), _message("43")) == "43"


def test_a_dm_answer_replies_to_nothing() -> None:
    assert _anchor(_message("7", chat_type="private")) is None
    assert _anchor(_fire(chat_type="private")) is None
