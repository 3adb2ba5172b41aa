"""Typed answers to an approval count only where there are no buttons: on Telegram the owner's "1" is just words."""

from __future__ import annotations

import asyncio

from bicameral.events import Inbound, Sender
from bicameral.store import Stores
from tests.unit.test_approvals_store import CHAT, OWNER, Channel, _approvals, _check


async def test_a_typed_1_on_telegram_approves_nothing(tmp_path):
    stores = Stores.open(tmp_path / "db.sqlite")
    channel = Channel()
    approvals = _approvals(stores, channel, [1000.0])
    waiting = asyncio.create_task(_check(approvals, {"text": "x"}))
    await channel.until_asked(1)
    for words in ("1", "approve", "2"):
        typed = Inbound(channel="telegram", chat=CHAT, message_id="9", sender=Sender(id=str(OWNER), name="Owner"),
                        text=words, ts=0.0)
        assert await approvals.take(typed) is typed, "Telegram has buttons: typed words go on as a message"
    assert not waiting.done()
    [ask] = channel.asks()
    assert [label for label, _ in ask.buttons] == ["Approve", "Deny"]
    waiting.cancel()
    stores.close()
