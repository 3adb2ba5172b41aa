"""The channel_cursors table: each channel's position on its platform, stored with the messages before it."""

from __future__ import annotations

import time
from collections.abc import Callable

from bicameral.store.sql import SqlDatabase


class CursorStore:
    def __init__(self, db: SqlDatabase, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def get(self, channel: str) -> str | None:
        row = self._db.query_one("SELECT position FROM channel_cursors WHERE channel = ?", (channel,))
        return row["position"] if row else None

    def set(self, channel: str, position: str) -> None:
        """Keep the position; inside the caller's transaction, it commits or rolls back with the batch."""
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO channel_cursors (channel, position, updated_at) VALUES (?, ?, ?)
                   ON CONFLICT(channel) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at""",
                (channel, position, self._clock()),
            )
