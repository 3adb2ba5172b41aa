"""The chat_leases table: one worker at a time runs a chat's turns, under a lease with a deadline and a number."""

from __future__ import annotations

from dataclasses import dataclass

from bicameral.store.sql import Connection, SqlDatabase


@dataclass(frozen=True)
class Lease:
    chat: str
    worker: str
    epoch: int  # grows each time the chat changes hands: a fencing token
    deadline: float


class LeaseStore:
    """Claims, renewals and the check a result's commit makes; every statement is one atomic step on either engine."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def claim(self, chat: str, worker: str, now: float, ttl: float) -> Lease | None:
        """The chat's lease for `worker`: when free, expired, or already its own (then only extended); else None."""
        with self._db.tx() as conn:
            row = conn.execute(
                """INSERT INTO chat_leases (chat, worker, epoch, deadline) VALUES (?, ?, 1, ?)
                   ON CONFLICT(chat) DO UPDATE SET
                       epoch = CASE WHEN chat_leases.worker = excluded.worker AND chat_leases.deadline >= ?
                                    THEN chat_leases.epoch ELSE chat_leases.epoch + 1 END,
                       worker = excluded.worker, deadline = excluded.deadline
                   WHERE chat_leases.deadline < ? OR chat_leases.worker = excluded.worker
                   RETURNING epoch""",
                (chat, worker, now + ttl, now, now),
            ).fetchone()
        return Lease(chat, worker, int(row[0]), now + ttl) if row is not None else None

    def renew(self, lease: Lease, now: float, ttl: float) -> Lease | None:
        """The same lease with a later deadline; None when it lapsed or another worker holds the chat now."""
        with self._db.tx() as conn:
            renewed = self._extend(conn, lease, now, now + ttl)
        return Lease(lease.chat, lease.worker, lease.epoch, now + ttl) if renewed else None

    def revive(self, lease: Lease, now: float, ttl: float) -> Lease | None:
        """A lease run out that no other worker took meanwhile (its row unchanged): this worker's again, extended."""
        with self._db.tx() as conn:
            cursor = conn.execute(
                "UPDATE chat_leases SET deadline = ? WHERE chat = ? AND worker = ? AND epoch = ?",
                (now + ttl, lease.chat, lease.worker, lease.epoch),
            )
        return Lease(lease.chat, lease.worker, lease.epoch, now + ttl) if cursor.rowcount == 1 else None

    def holds(self, conn: Connection, lease: Lease, now: float) -> bool:
        """Inside the transaction that commits a result: is the lease still this worker's? The row stays locked
        until that commit, so no other worker takes the chat between this check and the result."""
        return self._extend(conn, lease, now, lease.deadline)

    def release(self, lease: Lease) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "DELETE FROM chat_leases WHERE chat = ? AND worker = ? AND epoch = ?", (lease.chat, lease.worker, lease.epoch)
            )

    def holder(self, chat: str) -> Lease | None:
        row = self._db.query_one("SELECT chat, worker, epoch, deadline FROM chat_leases WHERE chat = ?", (chat,))
        return Lease(row["chat"], row["worker"], int(row["epoch"]), float(row["deadline"])) if row else None

    @staticmethod
    def _extend(conn: Connection, lease: Lease, now: float, deadline: float) -> bool:
        cursor = conn.execute(
            """UPDATE chat_leases SET deadline = ?
               WHERE chat = ? AND worker = ? AND epoch = ? AND deadline >= ?""",
            (deadline, lease.chat, lease.worker, lease.epoch, now),
        )
        return cursor.rowcount == 1
