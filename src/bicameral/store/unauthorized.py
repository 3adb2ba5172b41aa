"""The unauthorized_messages table: what the gate refused, kept out of the main history."""

from __future__ import annotations

import time
from collections.abc import Callable

from bicameral.store.db import Database


class UnauthorizedStore:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def record(self, chat: str, sender_id: str, sender_name: str, text: str) -> bool:
        """Store a refused message; True if this chat has never been told it is refused."""
        with self._db.tx() as conn:
            told = conn.execute(
                "SELECT 1 FROM unauthorized_messages WHERE chat = ? AND notified = 1 LIMIT 1", (chat,)
            ).fetchone()
            conn.execute(
                """INSERT INTO unauthorized_messages (chat, sender_id, sender_name, text, notified, created_at)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                (chat, sender_id, sender_name, text, 0 if told else 1, self._clock()),
            )
            return told is None

    def count(self, chat: str | None = None) -> int:
        if chat is None:
            return int(self._db.query_one("SELECT COUNT(*) FROM unauthorized_messages")[0])
        return int(self._db.query_one("SELECT COUNT(*) FROM unauthorized_messages WHERE chat = ?", (chat,))[0])
