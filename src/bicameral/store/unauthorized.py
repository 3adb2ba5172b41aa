"""The refused traffic: unauthorized_messages (capped, pruned) and refused_chats (what the owner was told)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bicameral.store.sql import SqlDatabase

_DIGEST_KEY = "gate.refused_digest_at"


@dataclass(frozen=True)
class RefusedChat:
    """A refused chat's refusals the owner has not been told about yet."""

    chat: str
    sender_id: str | None
    sender_name: str | None
    title: str | None
    new: int


@dataclass(frozen=True)
class RefusedSender:
    """A chat the gate refused: who wrote last, how often it was refused in all, and when."""

    chat: str
    sender_id: str | None
    sender_name: str | None
    title: str | None
    count: int
    first_at: float
    last_at: float


class UnauthorizedStore:
    def __init__(self, db: SqlDatabase, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def record(
        self,
        chat: str,
        sender_id: str,
        sender_name: str,
        text: str,
        *,
        title: str | None = None,
        keep: int = 1000,
        max_chars: int = 500,
        now: float | None = None,
    ) -> bool:
        """Store a refused message (truncated; only the newest `keep` are kept); True if the chat was never told."""
        now = self._clock() if now is None else now
        if len(text) > max_chars:
            text = text[:max_chars] + "…"
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO unauthorized_messages (chat, sender_id, sender_name, text, notified, created_at)
                   VALUES (?, ?, ?, ?, 0, ?)""",
                (chat, sender_id, sender_name, text, now),
            )
            conn.execute(
                "DELETE FROM unauthorized_messages WHERE id <= (SELECT MAX(id) FROM unauthorized_messages) - ?", (keep,)
            )
            conn.execute(
                """INSERT INTO refused_chats (chat, sender_id, sender_name, title, count, first_at, last_at)
                   VALUES (?, ?, ?, ?, 1, ?, ?)
                   ON CONFLICT(chat) DO UPDATE SET count = count + 1, last_at = excluded.last_at,
                       sender_id = excluded.sender_id, sender_name = excluded.sender_name, title = excluded.title""",
                (chat, sender_id, sender_name, title, now, now),
            )
            told = conn.execute("UPDATE refused_chats SET notified = 1 WHERE chat = ? AND notified = 0", (chat,))
            return told.rowcount > 0

    def take_digest(self, now: float, every_seconds: float) -> list[RefusedChat]:
        """The chats refused since the last digest, if one is due (none in the last `every_seconds`); marks them told."""
        with self._db.tx() as conn:
            # A write that changes nothing, first: on PostgreSQL it locks the rows to report, so a second worker taking
            # the digest at once waits here, then reads the first one's time below and sends none (SQLite's one
            # writer does the same by itself).
            conn.execute("UPDATE refused_chats SET reported = reported WHERE count > reported")
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (_DIGEST_KEY,)).fetchone()
            if row is not None and now - float(row["value"]) < every_seconds:
                return []
            rows = conn.execute(
                """SELECT chat, sender_id, sender_name, title, count - reported AS new FROM refused_chats
                   WHERE count > reported ORDER BY last_at DESC"""
            ).fetchall()
            if not rows:
                return []
            conn.execute("UPDATE refused_chats SET reported = count")
            conn.execute(
                "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (_DIGEST_KEY, repr(now)),
            )
            return [RefusedChat(r["chat"], r["sender_id"], r["sender_name"], r["title"], int(r["new"])) for r in rows]

    def refused_lately(self, limit: int = 10) -> tuple[list[RefusedSender], int]:
        """The chats refused most recently (newest first, at most `limit`), and how many chats were ever refused."""
        rows = self._db.query(
            """SELECT chat, sender_id, sender_name, title, count, first_at, last_at FROM refused_chats
               ORDER BY last_at DESC LIMIT ?""",
            (limit,),
        )
        total = self._db.query_one("SELECT COUNT(*) FROM refused_chats")
        found = [
            RefusedSender(r["chat"], r["sender_id"], r["sender_name"], r["title"], int(r["count"]), r["first_at"], r["last_at"])
            for r in rows
        ]
        return found, int(total[0]) if total else 0

    def count(self, chat: str | None = None) -> int:
        if chat is None:
            return int(self._db.query("SELECT COUNT(*) FROM unauthorized_messages")[0][0])
        return int(self._db.query("SELECT COUNT(*) FROM unauthorized_messages WHERE chat = ?", (chat,))[0][0])

    def texts(self) -> list[str]:
        """The refused texts still kept, oldest first."""
        return [row["text"] for row in self._db.query("SELECT text FROM unauthorized_messages ORDER BY id")]
