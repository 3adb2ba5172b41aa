"""Text Telegram can send but UTF-8 cannot encode is repaired at intake, stored and answered, not dropped."""

from __future__ import annotations

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
