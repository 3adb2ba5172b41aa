"""A message the delivery loop already tried waits out its backoff, even when its sender gets the chat next."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bicameral.delivery.outbox import Outbox
from bicameral.delivery.router import ActionRouter
from bicameral.events import Action, ActionResult, SendText
from bicameral.store.db import Database
from bicameral.store.messages import MessageStore
from bicameral.store.outbox import OutboxStore

CHAT = "stub:1"


class _Scripted:
    """Holds the earlier message until released; refuses the later one for now (a 429)."""

    name = "stub"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.holding = asyncio.Event()
        self.seen: list[str] = []

    async def perform(self, action: Action) -> ActionResult:
        if not isinstance(action, SendText):
            return ActionResult(ok=True)  # the typing shown while the next part waits
        self.seen.append(action.text)
        if action.text == "earlier":
            self.holding.set()
            await self.release.wait()
            return ActionResult(ok=True, message_ids=("1",))
        return ActionResult(ok=False, error="Too Many Requests", retry_after=30.0)


async def test_a_reply_the_loop_tried_while_its_sender_waited_is_not_sent_again_at_once(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    store, channel = OutboxStore(db), _Scripted()
    router = ActionRouter(MessageStore(db))
    router.register(channel)  # type: ignore[arg-type]
    store.add([SendText(chat=CHAT, text="earlier")], [time.time()])  # left by a previous run, due now
    outbox = Outbox(store, router)
    await outbox.start()
    try:
        await asyncio.wait_for(channel.holding.wait(), 10)  # the loop's drain holds the chat
        sender = asyncio.create_task(outbox.send([SendText(chat=CHAT, text="later")]))
        await asyncio.sleep(0)  # its first step records "later", then waits for the chat
        assert len(store.pending()) == 2
        channel.release.set()
        [result] = await asyncio.wait_for(sender, 10)
    finally:
        await outbox.stop()

    # The drain took "later" after "earlier" and was refused; its sender found it tried and left it queued.
    assert channel.seen == ["earlier", "later"]
    assert result.queued
    [waiting] = store.pending()
    assert waiting.attempts == 1 and waiting.not_before > time.time() + 20
