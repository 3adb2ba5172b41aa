"""The outbox table: messages, edits and deletions waiting to be carried out, and which inbound rows each answers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from bicameral.events import DeleteMessage, EditText, SendFile, SendText
from bicameral.redaction import scrub
from bicameral.store.messages import consume
from bicameral.store.sql import Connection, Row, SqlDatabase

PENDING = "pending"  # recorded, not yet accepted by the channel
SENT = "sent"
GIVEN_UP = "given_up"  # refused for good, or still failing after the give-up time

# What the outbox keeps: everything that changes what a chat reads. Typing and reactions are cosmetic and never
# kept; a text whose purpose is "status" is not kept either.
Queued = SendText | SendFile | EditText | DeleteMessage
# Spelled as the partial index `outbox_pending` spells it. Bound as a parameter, the state would make
# SQLite plan the statement again at every call, to learn whether the index applies: five times the cost.
_IS_PENDING = f"state = '{PENDING}'"
# A chat's oldest unsent message: the one nothing of the chat may overtake.
_FIRST_UNSENT = f"FROM outbox WHERE chat = ? AND {_IS_PENDING} ORDER BY id LIMIT 1"
# Takes an entry for one worker in one statement: its own, unclaimed, or one whose claim lapsed (its holder died).
_CLAIM = (
    f"UPDATE outbox SET worker = ?, claimed_until = ? WHERE id = ? AND {_IS_PENDING} "
    "AND (worker = ? OR worker IS NULL OR claimed_until < ?)"
)

# Inside the transaction that would write a chat's result: may this process still write for that chat? False when
# another worker serves the chat now (this one lost its lease); the result is then dropped.
Fence = Callable[[Connection, str], bool]


@dataclass(frozen=True)
class Claim:
    """Several workers share the table: this one's id, and how long an entry it takes stays its own."""

    worker: str
    seconds: float

    def holds(self, entry: OutboxEntry, now: float) -> bool:
        """Would `claim` take the entry now (the statement's condition, read from the entry)?"""
        return entry.worker in (None, self.worker) or (entry.claimed_until is not None and entry.claimed_until < now)


@dataclass(frozen=True)
class OutboxEntry:
    id: int
    chat: str
    action: Queued
    turn_id: str | None
    attempts: int
    not_before: float
    created_at: float
    # A text sent in parts: the ids of the parts an earlier attempt delivered (see SendText.sent_parts).
    parts_sent: tuple[str, ...] = ()
    # Several workers: who may attempt it, until when (None: nobody claimed it).
    worker: str | None = None
    claimed_until: float | None = None


@dataclass(frozen=True)
class QueuePlace:
    """The first unsent message of a chat, without the message."""

    id: int
    attempts: int
    not_before: float


class OutboxStore:
    """Messages are stored redacted: a retry after a restart sends the redacted text, never a stored secret."""

    def __init__(self, db: SqlDatabase, clock: Callable[[], float] = time.time, redact: Callable[[str], str] = scrub) -> None:
        self._db = db
        self._clock = clock
        self._redact = redact

    def transaction(self) -> AbstractContextManager[Connection]:
        """One transaction for this store's writes and other stores' (never held across an await)."""
        return self._db.tx()

    def add(
        self,
        actions: Sequence[Queued],
        not_before: Sequence[float],
        turn_id: str | None = None,
        answers: Sequence[int] = (),
        *,
        claim: Claim | None = None,
        fence: Fence | None = None,
    ) -> list[OutboxEntry]:
        """Record messages in one transaction, so either all of a reply's parts are kept or none. `answers`: the
        inbound rows this reply answers, held by its last part from now on (answered once it is out; never replayed).
        `claim`: the entries are the recording worker's until their time plus the claim's length. Nothing is recorded
        (no entries) when `fence` refuses one of the chats."""
        now = self._clock()
        entries = []
        with self._db.tx() as conn:
            if fence is not None and not all(fence(conn, chat) for chat in dict.fromkeys(a.chat for a in actions)):
                return []
            for index, (action, when) in enumerate(zip(actions, not_before, strict=True)):
                held = json.dumps(list(answers)) if answers and index == len(actions) - 1 else None
                row = (action.chat, turn_id, action_to_json(_redacted(action, self._redact)), when, now, held)
                if claim is None:  # one process: the statement as it always was
                    cursor = conn.execute(
                        """INSERT INTO outbox (chat, turn_id, action, not_before, created_at, answers)
                           VALUES (?, ?, ?, ?, ?, ?) RETURNING id""",
                        row,
                    )
                    entry = OutboxEntry(int(cursor.fetchone()[0]), action.chat, action, turn_id, 0, when, now)
                else:
                    until = when + claim.seconds
                    cursor = conn.execute(
                        """INSERT INTO outbox (chat, turn_id, action, not_before, created_at, answers, worker, claimed_until)
                           VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
                        (*row, claim.worker, until),
                    )
                    entry_id = int(cursor.fetchone()[0])
                    entry = OutboxEntry(entry_id, action.chat, action, turn_id, 0, when, now, (), claim.worker, until)
                entries.append(entry)
        return entries

    def claim(self, entry_id: int, claim: Claim, now: float) -> bool:
        """Take a pending entry for `claim`'s worker until now plus the claim's length; False: another worker has it."""
        cursor = self._db.execute(_CLAIM, (claim.worker, now + claim.seconds, entry_id, claim.worker, now))
        return cursor.rowcount == 1

    def pending(self) -> list[OutboxEntry]:
        """Every message still to send, oldest first."""
        rows = self._db.query(f"SELECT {_COLUMNS} FROM outbox WHERE {_IS_PENDING} ORDER BY id")
        return [_entry(row) for row in rows]

    def waiting(self) -> tuple[int, float | None]:
        """How many entries are not yet delivered, and when the oldest of them was recorded."""
        row = self._db.query_one(f"SELECT COUNT(*), MIN(created_at) FROM outbox WHERE {_IS_PENDING}")
        return (int(row[0]), row[1]) if row else (0, None)

    def heads(self) -> list[OutboxEntry]:
        """Each chat's oldest unsent message: all the dispatcher needs, however long the queues behind them."""
        rows = self._db.query(
            f"SELECT {_COLUMNS} FROM outbox WHERE id IN "
            f"(SELECT MIN(id) FROM outbox WHERE {_IS_PENDING} GROUP BY chat) ORDER BY id"
        )
        return [_entry(row) for row in rows]

    def head(self, chat: str) -> OutboxEntry | None:
        """The chat's oldest unsent message: nothing of the chat may go out before it."""
        row = self._db.query_one(f"SELECT {_COLUMNS} {_FIRST_UNSENT}", (chat,))
        return _entry(row) if row else None

    def head_place(self, chat: str) -> QueuePlace | None:
        """Where `head(chat)` stands, its message left unread: the sender usually holds that message already."""
        row = self._db.query_one(f"SELECT id, attempts, not_before {_FIRST_UNSENT}", (chat,))
        return QueuePlace(row["id"], row["attempts"], row["not_before"]) if row else None

    def retry_later(
        self, entry_id: int, not_before: float, error: str, parts_sent: Sequence[str] = (), claim: Claim | None = None
    ) -> None:
        """Try again no sooner than `not_before`; `parts_sent`: the parts of a text that are out already. A `claim`
        is extended to cover the wait, so no other worker takes the entry meanwhile."""
        sent = json.dumps(list(parts_sent)) if parts_sent else None
        if claim is None:
            self._db.execute(
                "UPDATE outbox SET attempts = attempts + 1, not_before = ?, last_error = ?, parts_sent = ? WHERE id = ?",
                (not_before, error, sent, entry_id),
            )
            return
        self._db.execute(
            """UPDATE outbox SET attempts = attempts + 1, not_before = ?, last_error = ?, parts_sent = ?, worker = ?,
               claimed_until = ? WHERE id = ?""",
            (not_before, error, sent, claim.worker, not_before + claim.seconds, entry_id),
        )

    def finish(self, entry_id: int, state: str, error: str | None = None) -> None:
        """Close an entry; the inbound rows it answers count as answered in the same transaction."""
        with self._db.tx() as conn:
            # One statement: on PostgreSQL a `settle` of another worker may write `answers` between a read and a write.
            row = conn.execute(
                """UPDATE outbox SET state = ?, attempts = attempts + 1, last_error = ?, finished_at = ? WHERE id = ?
                   RETURNING answers""",
                (state, error, self._clock(), entry_id),
            ).fetchone()
            if row is not None and row["answers"]:
                consume(conn, json.loads(row["answers"]), self._clock())

    def settle(
        self, turn_id: str, row_ids: Iterable[int | None], *, chat: str | None = None, fence: Fence | None = None
    ) -> bool:
        """A turn ended: its inbound rows are answered once its last message is out; True if that is still to come.
        Nothing is written (False) when `fence` refuses the turn's chat (given, or read from its rows)."""
        ids = [i for i in row_ids if i is not None]
        with self._db.tx() as conn:
            if fence is not None and (chat := chat or _chat_of(conn, turn_id, ids)) is not None and not fence(conn, chat):
                return False
            # Checked and written in one statement: a worker finishing that message meanwhile (PostgreSQL's READ
            # COMMITTED) makes this update wait for it, then find it no longer pending, and the rows are consumed here.
            held = conn.execute(
                f"""UPDATE outbox SET answers = ? WHERE {_IS_PENDING} AND id =
                    (SELECT id FROM outbox WHERE turn_id = ? ORDER BY id DESC LIMIT 1)""",
                (json.dumps(ids), turn_id),
            )
            if held.rowcount == 1:
                return True
            consume(conn, ids, self._clock())
            return False

    def held_rows(self, chat: str | None = None) -> set[int]:
        """Inbound rows (of one chat, or all) whose answer is recorded but not yet out: replaying them would answer
        twice."""
        of_chat = "" if chat is None else " AND chat = ?"
        rows = self._db.query(
            f"SELECT answers FROM outbox WHERE {_IS_PENDING} AND answers IS NOT NULL{of_chat}",
            () if chat is None else (chat,),
        )
        return {int(i) for row in rows for i in json.loads(row["answers"])}

    def file_paths(self, *, pending: bool) -> set[str]:
        """The snapshots that SendFile entries still to send (or already sent or given up) point at."""
        rows = self._db.query(
            f"SELECT action FROM outbox WHERE {'' if pending else 'NOT '}{_IS_PENDING} AND action LIKE ?",
            ('{"type": "SendFile"%',),
        )
        return {action.path for row in rows if isinstance(action := action_from_json(row["action"]), SendFile)}

    def prune_finished(self, before: float) -> int:
        """Forget entries sent or given up before `before` (the messages table keeps what was said); how many."""
        return self._db.execute(f"DELETE FROM outbox WHERE NOT {_IS_PENDING} AND finished_at < ?", (before,)).rowcount

    def renew_claims(self, claim: Claim, now: float) -> int:
        """The worker is alive: its unsent entries stay its own for the claim's length from now (none is shortened);
        a dead worker's lapse within that length, and another worker sends them."""
        until = now + claim.seconds
        return self._db.execute(
            f"UPDATE outbox SET claimed_until = ? WHERE worker = ? AND {_IS_PENDING} AND claimed_until < ?",
            (until, claim.worker, until),
        ).rowcount

    def let_go(self, worker: str) -> int:
        """A worker stopping cleanly: its unsent entries are anyone's at once (not after their claim); how many."""
        return self._db.execute(
            f"UPDATE outbox SET worker = NULL, claimed_until = NULL WHERE worker = ? AND {_IS_PENDING}", (worker,)
        ).rowcount

    def state_of(self, entry_id: int) -> str | None:
        row = self._db.query_one("SELECT state FROM outbox WHERE id = ?", (entry_id,))
        return row["state"] if row else None


_COLUMNS = "id, chat, action, turn_id, attempts, not_before, created_at, parts_sent, worker, claimed_until"


def _chat_of(conn: Connection, turn_id: str, row_ids: Sequence[int]) -> str | None:
    """The chat a turn answered: from its inbound rows, else from its recorded messages."""
    if row_ids:
        row = conn.execute("SELECT chat FROM messages WHERE id = ?", (row_ids[0],)).fetchone()
    else:
        row = conn.execute("SELECT chat FROM outbox WHERE turn_id = ? ORDER BY id DESC LIMIT 1", (turn_id,)).fetchone()
    return str(row["chat"]) if row is not None else None


def _entry(row: Row) -> OutboxEntry:
    return OutboxEntry(
        id=row["id"],
        chat=row["chat"],
        action=action_from_json(row["action"]),
        turn_id=row["turn_id"],
        attempts=row["attempts"],
        not_before=row["not_before"],
        created_at=row["created_at"],
        parts_sent=tuple(json.loads(row["parts_sent"])) if row["parts_sent"] else (),
        worker=row["worker"],
        claimed_until=row["claimed_until"],
    )


def _redacted(action: Queued, redact: Callable[[str], str]) -> Queued:
    """The action with its text redacted; the action itself when there was nothing to redact (the usual case)."""
    if isinstance(action, SendText | EditText):
        text = redact(action.text)
        return action if text == action.text else replace(action, text=text)
    if isinstance(action, DeleteMessage):
        return action
    caption = redact(action.caption) if action.caption else action.caption
    return action if caption == action.caption else replace(action, caption=caption)


_KINDS: dict[str, type[Queued]] = {kind.__name__: kind for kind in (SendText, SendFile, EditText, DeleteMessage)}
_TUPLES = ("audience", "sent_parts")  # the fields JSON gives back as lists


def action_to_json(action: Queued) -> str:
    # Every field is a str, None or a tuple of str (buttons: of pairs): the fields as they are, without asdict's deep copy.
    return json.dumps({"type": type(action).__name__, **vars(action)}, ensure_ascii=False)


def action_from_json(payload: str) -> Queued:
    data = json.loads(payload)
    kind = _KINDS[data.pop("type")]
    for name in _TUPLES:
        if name in data:
            data[name] = tuple(data[name] or ())
    if "buttons" in data:
        data["buttons"] = tuple((label, value) for label, value in data["buttons"] or ())
    return kind(**data)
