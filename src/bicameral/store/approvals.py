"""The approvals table: tool calls waiting for the owner's Approve or Deny, and how each was decided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bicameral.store.sql import Row, SqlDatabase

ApprovalState = Literal["open", "approved", "denied", "expired"]


@dataclass(frozen=True)
class Approval:
    token: str
    chat: str  # the chat whose run asked for the call
    owner_chat: str  # where the owner was asked
    message_id: str | None
    tool: str
    call: str  # digest of the tool's name and arguments
    summary: str
    state: ApprovalState
    deadline: float
    late: bool = False  # decided when nothing waited for it (after a restart)

    def is_open(self, now: float) -> bool:
        return self.state == "open" and now < self.deadline


class ApprovalStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def ask(
        self, token: str, chat: str, owner_chat: str, tool: str, call: str, summary: str, *, now: float, deadline: float
    ) -> None:
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO approvals (token, chat, owner_chat, tool, call, summary, asked_at, deadline)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (token, chat, owner_chat, tool, call, summary, now, deadline),
            )

    def sent(self, token: str, message_id: str) -> None:
        """The asking message: only a press on it counts."""
        with self._db.tx() as conn:
            conn.execute("UPDATE approvals SET message_id = ? WHERE token = ?", (message_id, token))

    def get(self, token: str) -> Approval | None:
        row = self._db.query_one("SELECT * FROM approvals WHERE token = ?", (token,))
        return _approval(row) if row else None

    def asked_before(self, chat: str, call: str, since: float, now: float) -> list[Approval]:
        """The same call in `chat`, asked before `since` (by an earlier process): open, or decided late."""
        rows = self._db.query(
            """SELECT * FROM approvals WHERE chat = ? AND call = ? AND asked_at < ?
               AND ((state = 'open' AND deadline > ?) OR (state IN ('approved', 'denied') AND late = 1))
               ORDER BY asked_at DESC""",
            (chat, call, since, now),
        )
        return [_approval(row) for row in rows]

    def close(self, token: str, state: ApprovalState, now: float, *, late: bool = False) -> bool:
        """Decide an open approval; False when it was decided already (the other of two presses won)."""
        with self._db.tx() as conn:
            cursor = conn.execute(
                "UPDATE approvals SET state = ?, closed_at = ?, late = ? WHERE token = ? AND state = 'open'",
                (state, now, int(late), token),
            )
            return cursor.rowcount == 1

    def taken(self, token: str) -> None:
        """A late decision handed to the run that asked the same again: it is not handed out twice."""
        with self._db.tx() as conn:
            conn.execute("UPDATE approvals SET late = 0 WHERE token = ?", (token,))


def _approval(row: Row) -> Approval:
    return Approval(
        token=row["token"],
        chat=row["chat"],
        owner_chat=row["owner_chat"],
        message_id=row["message_id"],
        tool=row["tool"],
        call=row["call"],
        summary=row["summary"],
        state=row["state"],
        deadline=row["deadline"],
        late=bool(row["late"]),
    )
