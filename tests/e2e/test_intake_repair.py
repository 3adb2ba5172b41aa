"""Text Telegram can send but UTF-8 cannot encode is repaired at intake, stored and answered, not dropped."""

from __future__ import annotations

import sqlite3

from tests.conftest import OWNER
from tests.fakes.model_server import Reply


async def test_a_lone_surrogate_is_stored_and_answered(telegram, models, start_bot):
    models.script(Reply(text="got it"))
    app = await start_bot(debounce_ms=0)
    telegram.push_raw_update(
        {
            "message": {
                "message_id": 1,
                "date": 1,
                "chat": {"id": OWNER, "type": "private", "first_name": "Owner"},
                "from": {"id": OWNER, "is_bot": False, "first_name": "Owner"},
                "text": "half an emoji: \ud83d and on",
            }
        }
    )
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "got it"
    assert "half an emoji: \ufffd and on" in models.requests[0].last_user_text()
    [row] = [m for m in app.stores.messages.recent(f"telegram:{OWNER}") if m["direction"] == "in"]
    assert row["text"] == "half an emoji: \ufffd and on"


async def test_a_message_the_store_fails_to_take_is_retried_not_skipped(telegram, models, start_bot):
    """A full disk while storing: the update is not acknowledged, so it is stored and answered once the disk recovers."""
    models.script(Reply(text="answered after all"))
    app = await start_bot(debounce_ms=0)
    record = app.stores.messages.record_inbound
    failures = iter([sqlite3.OperationalError("database or disk is full")] * 2)

    def failing_twice(*args, **kwargs):
        error = next(failures, None)
        if error is not None:
            raise error
        return record(*args, **kwargs)

    app.stores.messages.record_inbound = failing_twice  # type: ignore[method-assign]
    telegram.user_sends(OWNER, "please keep this one")
    sent = await telegram.await_sent(OWNER, 1, timeout=60)
    assert sent[0]["text"] == "answered after all"
    [row] = [m for m in app.stores.messages.recent(f"telegram:{OWNER}") if m["direction"] == "in"]
    assert row["text"] == "please keep this one"
