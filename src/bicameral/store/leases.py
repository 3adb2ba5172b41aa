"""The chat_leases table: one worker at a time runs a chat's turns, under a lease with a deadline and a number."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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
            return self.claim_in(conn, [chat], worker, now, ttl).get(chat)

    @staticmethod
    def claim_in(conn: Connection, chats: Sequence[str], worker: str, now: float, ttl: float) -> dict[str, Lease]:
        """`claim` for many chats in one statement of the caller's transaction: the leases won, by chat."""
        if not chats:
            return {}
        rows = conn.execute(
            f"""INSERT INTO chat_leases (chat, worker, epoch, deadline) VALUES {", ".join("(?, ?, 1, ?)" for _ in chats)}
               ON CONFLICT(chat) DO UPDATE SET
                   epoch = CASE WHEN chat_leases.worker = excluded.worker AND chat_leases.deadline >= ?
                                THEN chat_leases.epoch ELSE chat_leases.epoch + 1 END,
                   worker = excluded.worker, deadline = excluded.deadline
               WHERE chat_leases.deadline < ? OR chat_leases.worker = excluded.worker
               RETURNING chat, epoch""",
            (*(value for chat in chats for value in (chat, worker, now + ttl)), now, now),
        ).fetchall()
        return {row["chat"]: Lease(row["chat"], worker, int(row["epoch"]), now + ttl) for row in rows}

    def renew(self, leases: Sequence[Lease], now: float, ttl: float) -> dict[str, Lease]:
        """The leases still held (not lapsed, not another worker's), each with a later deadline, by chat; one statement."""
        if not leases:
            return {}
        worker = leases[0].worker
        with self._db.tx() as conn:
            rows = conn.execute(
                f"""UPDATE chat_leases SET deadline = ?
                    WHERE worker = ? AND deadline >= ? AND (chat, epoch) IN (VALUES {_pairs(leases)})
                    RETURNING chat""",
                (now + ttl, worker, now, *_chat_epochs(leases)),
            ).fetchall()
        renewed = {row["chat"] for row in rows}
        return {lease.chat: replace(lease, deadline=now + ttl) for lease in leases if lease.chat in renewed}

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

    def release(self, leases: Sequence[Lease]) -> None:
        """Let these leases (of one worker) go, in one statement; one another worker holds now is left alone."""
        if not leases:
            return
        with self._db.tx() as conn:
            conn.execute(
                f"DELETE FROM chat_leases WHERE worker = ? AND (chat, epoch) IN (VALUES {_pairs(leases)})",
                (leases[0].worker, *_chat_epochs(leases)),
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


def _pairs(leases: Sequence[Lease]) -> str:
    return ", ".join("(?, ?)" for _ in leases)


def _chat_epochs(leases: Sequence[Lease]) -> tuple[object, ...]:
    assert len({lease.worker for lease in leases}) == 1, "one worker's leases at a time"
    return tuple(value for lease in leases for value in (lease.chat, lease.epoch))
