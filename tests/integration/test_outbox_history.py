"""A sent message is in the chat's history exactly when the outbox counts it sent: one transaction for both."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bicameral.delivery.outbox import Outbox
from bicameral.delivery.router import ActionRouter
from bicameral.events import Action, ActionResult, SendText
from bicameral.store.db import Database
from bicameral.store.messages import MessageStore
from bicameral.store.outbox import PENDING, OutboxStore

CHAT = "stub:1"


class _Accepting:
    """A channel that takes every message."""

    name = "stub"

    async def perform(self, action: Action) -> ActionResult:
        return ActionResult(ok=True, message_ids=("41",))


def _wired(tmp_path: Path) -> tuple[Outbox, OutboxStore, MessageStore]:
    db = Database(tmp_path / "db.sqlite")
    messages, store = MessageStore(db), OutboxStore(db)
    router = ActionRouter(messages)
    router.register(_Accepting())  # type: ignore[arg-type]
    return Outbox(store, router), store, messages


def _history(messages: MessageStore) -> list[tuple[str, str]]:
    return [(m["direction"], m["text"]) for m in messages.recent(CHAT)]


async def test_a_sent_message_is_in_the_history_and_marked_sent(tmp_path: Path) -> None:
    outbox, store, messages = _wired(tmp_path)
    [result] = await outbox.send([SendText(chat=CHAT, text="hello")])
    assert result.ok and result.message_ids == ("41",)
    assert _history(messages) == [("out", "hello")]
    assert store.head(CHAT) is None and store.pending() == []


async def test_when_marking_it_sent_fails_the_history_does_not_keep_it_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outbox, store, messages = _wired(tmp_path)

    def disk_full(entry_id: int, state: str, error: str | None = None) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "finish", disk_full)
    with pytest.raises(sqlite3.OperationalError):
        await outbox.send([SendText(chat=CHAT, text="hello")])
    assert _history(messages) == []  # not half-recorded
    [entry] = store.pending()
    assert store.state_of(entry.id) == PENDING  # still to send: the next attempt sends and records it
