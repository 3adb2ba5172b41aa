"""The chat_queue table: which chats have work waiting, taken by the worker that leases each chat (PostgreSQL only)."""

from __future__ import annotations

from collections.abc import Iterable

from bicameral.events import split_chat_key
from bicameral.store.leases import Lease, LeaseStore
from bicameral.store.sql import SqlDatabase

# One NOTIFY channel for every worker: a payload-free wake-up, the rows say what to do.
WORK_CHANNEL = "bicameral_work"
# Rows read per chat a take has room for: a burst in one chat is several rows, and a take should still find others.
ROWS_PER_CHAT = 4


class ChatQueue:
    """Signals that a chat has work, and takes them chat by chat under a lease; shared by every worker."""

    def __init__(self, db: SqlDatabase, leases: LeaseStore, *, open_task_states: tuple[str, ...]) -> None:
        self._db = db
        self._leases = leases
        self._open_task_states = open_task_states  # the tasks layer's to say, above this one

    def signal(self, chats: Iterable[tuple[str, str]]) -> None:
        """(chat, channel) pairs have work; every worker is woken once the rows are committed."""
        with self._db.tx() as conn:
            conn.executemany("INSERT INTO chat_queue (chat, channel) VALUES (?, ?)", list(chats))
            conn.execute("SELECT pg_notify(?, '')", (WORK_CHANNEL,))

    def take(self, worker: str, channels: Iterable[str], now: float, ttl: float, room: int) -> list[Lease]:
        """The rows of the chats `worker` leases (their leases extended) and of up to `room` chats nobody leases (now
        leased to it), removed from the queue; the leases, in the queue's order.

        Rows another worker is taking right now are skipped, not waited for; the rows of a chat another worker leases
        stay for that worker, which is woken too. Only the rows this take may use are locked.
        """
        names = sorted(set(channels))
        if not names:
            return []
        marks = ", ".join("?" for _ in names)
        with self._db.tx() as conn:
            mine = conn.execute(
                f"""SELECT id, chat FROM chat_queue WHERE channel IN ({marks})
                      AND chat IN (SELECT chat FROM chat_leases WHERE worker = ? AND deadline >= ?)
                    FOR UPDATE SKIP LOCKED""",
                (*names, worker, now),
            ).fetchall()
            fresh = conn.execute(
                f"""SELECT id, chat FROM chat_queue WHERE channel IN ({marks})
                      AND chat NOT IN (SELECT chat FROM chat_leases WHERE deadline >= ?)
                    ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED""",
                (*names, now, room * ROWS_PER_CHAT),
            ).fetchall() if room > 0 else []
            wanted = {row["chat"] for row in mine} | set(list(dict.fromkeys(row["chat"] for row in fresh))[:room])
            ids_of: dict[str, list[int]] = {}
            for row in sorted([*mine, *fresh], key=lambda row: int(row["id"])):
                if row["chat"] in wanted:
                    ids_of.setdefault(row["chat"], []).append(int(row["id"]))
            taken = self._leases.claim_in(conn, list(ids_of), worker, now, ttl)
            ids = [i for chat in taken for i in ids_of[chat]]
            if ids:
                conn.execute(f"DELETE FROM chat_queue WHERE id IN ({', '.join('?' for _ in ids)})", tuple(ids))
        return [taken[chat] for chat in ids_of if chat in taken]

    def signal_orphans(self, now: float) -> int:
        """Chats with work that no live lease covers and no row signals (a worker died or stopped, or this is the first
        start): unanswered messages, open tasks, a lease run out. Signalled again; how many."""
        states = ", ".join("?" for _ in self._open_task_states)
        rows = self._db.query(
            f"""SELECT chat FROM (
                    SELECT chat FROM messages WHERE status = 'pending' AND direction = 'in'
                    UNION SELECT chat FROM tasks WHERE state IN ({states})
                    UNION SELECT chat FROM chat_leases WHERE deadline < ?
                ) AS work
                WHERE chat NOT IN (SELECT chat FROM chat_leases WHERE deadline >= ?)
                  AND chat NOT IN (SELECT chat FROM chat_queue)""",
            (*self._open_task_states, now, now),
        )
        if rows:
            self.signal((row["chat"], split_chat_key(row["chat"])[0]) for row in rows)
        return len(rows)
