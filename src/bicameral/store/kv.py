"""The kv table: small named values that must survive a restart."""

from __future__ import annotations

from bicameral.store.sql import SqlDatabase


class KeyValueStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def get(self, key: str) -> str | None:
        row = self._db.query_one("SELECT value FROM kv WHERE key = ?", (key,))
        return row["value"] if row else None

    def set(self, key: str, value: str) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def delete(self, key: str) -> None:
        with self._db.tx() as conn:
            conn.execute("DELETE FROM kv WHERE key = ?", (key,))
