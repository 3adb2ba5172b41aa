"""The tool_calls table: an audit row for every tool invocation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from bicameral.redaction import scrub, scrub_obj
from bicameral.store.sql import SqlDatabase
from bicameral.types import Clock

_MAX_STORED = 4000


class ToolCallStore:
    def __init__(self, db: SqlDatabase, clock: Clock = time.time, redact: Callable[[str], str] = scrub) -> None:
        self._db = db
        self._clock = clock
        self._redact = redact

    def record(
        self,
        *,
        chat: str | None,
        turn_id: str | None,
        name: str,
        args: dict[str, Any],
        result: str | None,
        error: str | None,
        duration_ms: float,
    ) -> None:
        redact = self._redact
        args, result, error = scrub_obj(args, redact), result and redact(result), error and redact(error)
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO tool_calls (chat, turn_id, name, args, result, error, duration_ms, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    chat,
                    turn_id,
                    name,
                    json.dumps(args, ensure_ascii=False, default=str)[:_MAX_STORED],
                    result[:_MAX_STORED] if result is not None else None,
                    error[:_MAX_STORED] if error is not None else None,
                    duration_ms,
                    self._clock(),
                ),
            )

    def recent(self, limit: int = 20, chat: str | None = None) -> list[dict[str, Any]]:
        if chat is None:
            rows = self._db.query("SELECT * FROM tool_calls ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self._db.query("SELECT * FROM tool_calls WHERE chat = ? ORDER BY id DESC LIMIT ?", (chat, limit))
        return [dict(row) for row in rows]

    def recent_failures(self, limit: int = 10, *, among: int = 10_000) -> list[dict[str, Any]]:
        """The newest failed calls (an error result), newest first, looked for among the last `among` calls only."""
        rows = self._db.query(
            """SELECT id, chat, name, error, duration_ms, created_at FROM tool_calls
               WHERE error IS NOT NULL AND id > (SELECT COALESCE(MAX(id), 0) FROM tool_calls) - ?
               ORDER BY id DESC LIMIT ?""",
            (among, limit),
        )
        return [dict(row) for row in rows]
