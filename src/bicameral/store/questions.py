"""The questions table: what `ask_user` asked, of whom, with which choices, and whether it is still open."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from bicameral.store.sql import Row, SqlDatabase

QuestionState = Literal["open", "answered", "expired"]


@dataclass(frozen=True)
class Question:
    token: str
    chat: str
    message_id: str | None
    askers: tuple[str, ...]  # person keys whose answer counts
    question: str
    choices: tuple[str, ...]
    state: QuestionState
    answer: str | None
    deadline: float
    cause: tuple[str, ...] = ()  # the messages that made the run ask: never an answer to it
    late: bool = False  # answered when nothing waited for it

    def same(self, askers: tuple[str, ...], question: str, choices: tuple[str, ...]) -> bool:
        return (self.askers, self.question, self.choices) == (askers, question, choices)

    def is_open(self, now: float) -> bool:
        return self.state == "open" and now < self.deadline


class QuestionStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def ask(
        self,
        token: str,
        chat: str,
        askers: tuple[str, ...],
        question: str,
        choices: tuple[str, ...],
        *,
        cause: tuple[str, ...] = (),
        now: float,
        deadline: float,
    ) -> None:
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO questions (token, chat, askers, question, choices, cause, asked_at, deadline)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    token, chat, json.dumps(list(askers)), question, json.dumps(list(choices)),
                    json.dumps(list(cause)), now, deadline,
                ),
            )

    def sent(self, token: str, message_id: str) -> None:
        """The question's message: only a press on that message counts."""
        with self._db.tx() as conn:
            conn.execute("UPDATE questions SET message_id = ? WHERE token = ?", (message_id, token))

    def get(self, token: str) -> Question | None:
        row = self._db.query_one("SELECT * FROM questions WHERE token = ?", (token,))
        return _question(row) if row else None

    def open_for(self, chat: str, person: str, now: float) -> Question | None:
        """The newest question still open in `chat` that `person` may answer."""
        rows = self._db.query(
            "SELECT * FROM questions WHERE chat = ? AND state = 'open' AND deadline > ? ORDER BY asked_at DESC",
            (chat, now),
        )
        return next((q for q in map(_question, rows) if person in q.askers), None)

    def asked_before(self, chat: str, since: float, now: float) -> list[Question]:
        """Questions in `chat` asked before `since` (by an earlier process) that are open, or were answered late."""
        rows = self._db.query(
            """SELECT * FROM questions WHERE chat = ? AND asked_at < ?
               AND ((state = 'open' AND deadline > ?) OR (state = 'answered' AND late = 1))
               ORDER BY asked_at DESC""",
            (chat, since, now),
        )
        return [_question(row) for row in rows]

    def close(
        self,
        token: str,
        state: QuestionState,
        now: float,
        *,
        answer: str | None = None,
        by: str | None = None,
        late: bool = False,
    ) -> bool:
        """Close an open question; False when it was closed already (the other of two presses won)."""
        with self._db.tx() as conn:
            cursor = conn.execute(
                """UPDATE questions SET state = ?, answer = ?, answered_by = ?, closed_at = ?, late = ?
                   WHERE token = ? AND state = 'open'""",
                (state, answer, by, now, int(late), token),
            )
            return cursor.rowcount == 1

    def taken(self, token: str) -> None:
        """A late answer handed to a run that asked the same again: it is not handed out twice."""
        with self._db.tx() as conn:
            conn.execute("UPDATE questions SET late = 0 WHERE token = ?", (token,))


def _question(row: Row) -> Question:
    return Question(
        token=row["token"],
        chat=row["chat"],
        message_id=row["message_id"],
        askers=tuple(json.loads(row["askers"])),
        question=row["question"],
        choices=tuple(json.loads(row["choices"])),
        state=row["state"],
        answer=row["answer"],
        deadline=row["deadline"],
        cause=tuple(json.loads(row["cause"])),
        late=bool(row["late"]),
    )
