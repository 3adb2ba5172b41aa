"""The sessions table: one model conversation per chat, for resume after a restart."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from bicameral.redaction import scrub, scrub_obj
from bicameral.store.memory import blank_forgotten
from bicameral.store.sql import SqlDatabase
from bicameral.types import Clock


class SessionStore:
    def __init__(self, db: SqlDatabase, clock: Clock = time.time, redact: Callable[[str], str] = scrub) -> None:
        self._db = db
        self._clock = clock
        self._redact = redact

    def load(self, chat: str) -> list[dict[str, Any]]:
        row = self._db.query_one("SELECT messages FROM sessions WHERE chat = ?", (chat,))
        return json.loads(row["messages"]) if row else []

    def save(self, chat: str, messages: list[dict[str, Any]]) -> None:
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO sessions (chat, messages, updated_at) VALUES (?, ?, ?)
                   ON CONFLICT(chat) DO UPDATE SET messages = excluded.messages, updated_at = excluded.updated_at""",
                (chat, json.dumps(scrub_obj(messages, self._redact), ensure_ascii=False), self._clock()),
            )

    def clear(self, chat: str) -> None:
        with self._db.tx() as conn:
            conn.execute("DELETE FROM sessions WHERE chat = ?", (chat,))

    def scrub(self, chat: str, texts: Sequence[str]) -> None:
        """Blank forgotten facts out of the chat's stored conversation, so a later turn cannot read them back."""
        stored = self.load(chat)
        cleaned = blank_forgotten(stored, texts)
        if cleaned != stored:
            self.save(chat, cleaned)
