"""The rate_limits table: per-sender counts in fixed one-minute buckets."""

from __future__ import annotations

from bicameral.store.sql import SqlDatabase


class RateLimitStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db
        self._pruned_for: int | None = None  # the bucket the old ones were last cleared for: once a minute is enough

    def hit(self, sender_id: str, bucket: int) -> tuple[int, bool]:
        """Count one message; returns (count in this bucket, whether the sender was already warned)."""
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO rate_limits (sender_id, bucket, count) VALUES (?, ?, 1)
                   ON CONFLICT(sender_id, bucket) DO UPDATE SET count = count + 1""",
                (sender_id, bucket),
            )
            if bucket != self._pruned_for:
                conn.execute("DELETE FROM rate_limits WHERE bucket < ?", (bucket - 5,))
                self._pruned_for = bucket
            row = conn.execute(
                "SELECT count, notified FROM rate_limits WHERE sender_id = ? AND bucket = ?", (sender_id, bucket)
            ).fetchone()
            return int(row["count"]), bool(row["notified"])

    def mark_warned(self, sender_id: str, bucket: int) -> None:
        with self._db.tx() as conn:
            conn.execute("UPDATE rate_limits SET notified = 1 WHERE sender_id = ? AND bucket = ?", (sender_id, bucket))
