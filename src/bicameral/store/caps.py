"""Spending caps' tables (migration 016): the spend per person of a day, the owner's notices and allowances, and the
messages held because a cap was reached."""

from __future__ import annotations

from dataclasses import dataclass

from bicameral.store.sql import SqlDatabase

EVERYONE = "*"  # the person of everyone's cap together


@dataclass(frozen=True)
class CapNotice:
    """The owner's message about one person's (or everyone's) cap on one UTC day."""

    token: str
    day: str
    person: str
    chat: str
    message_id: str | None
    state: str  # open | answered
    answer: str | None


class CapStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def spend_since(self, since: float) -> tuple[int, dict[str, int]]:
        """Every token the models reported since `since`: in all, and per person (a call several people caused
        counts in full for each)."""
        rows = self._db.query(
            """SELECT people, SUM(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS tokens
               FROM model_usage WHERE at >= ? GROUP BY people""",
            (since,),
        )
        total, per_person = 0, dict[str, int]()
        for row in rows:
            tokens = int(row["tokens"] or 0)
            total += tokens
            for person in (row["people"] or "").split():
                per_person[person] = per_person.get(person, 0) + tokens
        return total, per_person

    def allowances(self, day: str) -> dict[str, tuple[int, bool]]:
        """What the owner allowed over the caps on `day`: per person (or EVERYONE), (extra tokens, unlimited)."""
        rows = self._db.query("SELECT person, extra, unlimited FROM cap_allowances WHERE day = ?", (day,))
        return {row["person"]: (int(row["extra"]), bool(row["unlimited"])) for row in rows}

    def allow(self, day: str, person: str, extra: int | None) -> None:
        """`extra` tokens more on `day` (added to any earlier allowance), or, with None, no cap for the rest of it."""
        unlimited = 1 if extra is None else 0
        self._db.execute(
            """INSERT INTO cap_allowances (day, person, extra, unlimited) VALUES (?, ?, ?, ?)
               ON CONFLICT (day, person) DO UPDATE SET extra = extra + excluded.extra,
                   unlimited = MAX(unlimited, excluded.unlimited)""",
            (day, person, extra or 0, unlimited),
        )

    def add_notice(self, token: str, day: str, person: str, chat: str, at: float) -> bool:
        """Record the owner's notice about `person` on `day`; False when one was recorded already (one a day)."""
        cursor = self._db.execute(
            "INSERT INTO cap_notices (token, day, person, chat, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (token, day, person, chat, at),
        )
        return cursor.rowcount == 1

    def notice_sent(self, token: str, message_id: str) -> None:
        self._db.execute("UPDATE cap_notices SET message_id = ? WHERE token = ?", (message_id, token))

    def notice(self, token: str) -> CapNotice | None:
        row = self._db.query_one("SELECT * FROM cap_notices WHERE token = ?", (token,))
        if row is None:
            return None
        return CapNotice(
            row["token"], row["day"], row["person"], row["chat"], row["message_id"], row["state"], row["answer"]
        )

    def answer(self, token: str, choice: str) -> bool:
        """Close an open notice with the owner's choice; False when it was answered already (the other press won)."""
        cursor = self._db.execute(
            "UPDATE cap_notices SET state = 'answered', answer = ? WHERE token = ? AND state = 'open'", (choice, token)
        )
        return cursor.rowcount == 1

    def hold(self, row_id: int, at: float) -> bool:
        """Mark an inbound message held by a cap; False when it was held already (its person was told then)."""
        cursor = self._db.execute("INSERT INTO cap_holds (row_id, at) VALUES (?, ?) ON CONFLICT DO NOTHING", (row_id, at))
        return cursor.rowcount == 1

    def release(self, row_ids: list[int]) -> None:
        if row_ids:
            marks = ", ".join("?" * len(row_ids))
            self._db.execute(f"DELETE FROM cap_holds WHERE row_id IN ({marks})", tuple(row_ids))
