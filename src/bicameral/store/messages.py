"""The messages table: accepted inbound updates and sent messages, with inbound status."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass
from typing import Any

from bicameral.events import Attachment, AttachmentRef, Authority, Inbound, Press, Quoted, Sender
from bicameral.redaction import scrub
from bicameral.store.sql import Connection, Row, SqlDatabase
from bicameral.types import Clock

PENDING = "pending"  # accepted, not yet answered: a restart replays these
CONSUMED = "consumed"  # a turn answered it
IGNORED = "ignored"  # stored for history only (overheard in a group, command handled inline)
# The `kind` of a message we sent that is a notice, not conversation: the gate's word to a refused stranger, a
# rate limit, the owner's digest of refused chats (whose names and titles strangers chose). Kept for the
# record, never read back to a model: no reader of history for a prompt or a tool returns it.
NOTICE = "notice"


def consume(conn: Connection, row_ids: Iterable[int | None], now: float) -> None:
    """Mark pending inbound rows answered, inside the caller's transaction (`None`s, rows never stored, are skipped)."""
    ids = [i for i in row_ids if i is not None]
    if not ids:
        return
    marks = ",".join("?" * len(ids))
    conn.execute(
        f"UPDATE messages SET status = '{CONSUMED}', consumed_at = ? WHERE id IN ({marks}) AND status = '{PENDING}'",
        (now, *ids),
    )


class MessageStore:
    def __init__(self, db: SqlDatabase, clock: Clock = time.time, redact: Callable[[str], str] = scrub) -> None:
        self._db = db
        self._clock = clock
        self._redact = redact  # for what we send: inbound text was scrubbed by the gate

    def record_inbound(self, inbound: Inbound, status: str = PENDING) -> int | None:
        """Persist an inbound; returns its row id, or None if this platform update was seen before."""
        with self._db.tx() as conn:
            cursor = conn.execute(
                """INSERT INTO messages
                   (chat, direction, message_id, update_id, channel, kind, sender_id, sender_name,
                    text, reply_to, payload, status, created_at)
                   VALUES (?, 'in', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id""",
                (
                    inbound.chat,
                    inbound.message_id,
                    inbound.update_id,
                    inbound.channel,
                    inbound.kind,
                    inbound.sender.id,
                    inbound.sender.name,
                    inbound.text,
                    inbound.reply_to.message_id if inbound.reply_to else None,
                    inbound_to_json(inbound),
                    status,
                    self._clock(),
                ),
            )
            row = cursor.fetchone()
            return int(row[0]) if row is not None else None

    def record_outbound(
        self, chat: str, channel: str, message_id: str | None, text: str, audience: tuple[str, ...] = ()
    ) -> int:
        with self._db.tx() as conn:
            cursor = conn.execute(
                """INSERT INTO messages (chat, direction, message_id, channel, sender_name, text, created_at, audience)
                   VALUES (?, 'out', ?, ?, 'bot', ?, ?, ?) RETURNING id""",
                (chat, message_id, channel, self._redact(text), self._clock(), json.dumps(audience) if audience else None),
            )
            return int(cursor.fetchone()[0])

    def audience_of(self, chat: str, message_id: str) -> tuple[str, ...] | None:
        """Whose words a message we sent answers; () when none was kept (a notice, an old one); None: not ours."""
        row = self._db.query_one(
            "SELECT audience FROM messages WHERE chat = ? AND direction = 'out' AND message_id = ? ORDER BY id DESC LIMIT 1",
            (chat, message_id),
        )
        if row is None:
            return None
        return tuple(json.loads(row["audience"])) if row["audience"] else ()

    def record_notice(self, chat: str, channel: str, message_id: str | None, text: str) -> int:
        """Keep a notice we sent (see NOTICE): in the table, out of every history a model reads."""
        with self._db.tx() as conn:
            cursor = conn.execute(
                f"""INSERT INTO messages (chat, direction, message_id, channel, kind, sender_name, text, created_at)
                    VALUES (?, 'out', ?, ?, '{NOTICE}', 'bot', ?, ?) RETURNING id""",
                (chat, message_id, channel, self._redact(text), self._clock()),
            )
            return int(cursor.fetchone()[0])

    def is_notice(self, chat: str, message_id: str) -> bool:
        """Whether the message we sent with this id is a notice (a reply quoting it must not bring it back)."""
        row = self._db.query_one(
            f"SELECT 1 FROM messages WHERE chat = ? AND direction = 'out' AND message_id = ? AND kind = '{NOTICE}' LIMIT 1",
            (chat, message_id),
        )
        return row is not None

    def mark_consumed(self, row_ids: Iterable[int | None]) -> None:
        with self._db.tx() as conn:
            consume(conn, row_ids, self._clock())

    def rewrite(self, row_id: int | None, inbound: Inbound) -> None:
        """A stored inbound's kind, text and payload replaced (a button press becomes the answer it gave)."""
        with self._db.tx() as conn:
            conn.execute(
                "UPDATE messages SET kind = ?, text = ?, payload = ? WHERE id = ? AND direction = 'in'",
                (inbound.kind, inbound.text, inbound_to_json(inbound), row_id),
            )

    def pending_inbound(self, chat: str | None = None) -> list[Inbound]:
        """Inbound messages accepted but never answered (of one chat, or all), oldest first."""
        # A literal, as the partial index `messages_pending` has it: a bound value is planned at every call.
        where = f"status = '{PENDING}' AND direction = 'in'" + (" AND chat = ?" if chat is not None else "")
        rows = self._db.query(f"SELECT id, payload FROM messages WHERE {where} ORDER BY id", () if chat is None else (chat,))
        return [inbound_from_json(row["payload"], row_id=row["id"]) for row in rows]

    def recent(self, chat: str, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._db.query(
            f"""SELECT direction, message_id, sender_name, text, created_at FROM messages
               WHERE chat = ? AND kind <> '{NOTICE}' ORDER BY id DESC LIMIT ?""",
            (chat, limit),
        )
        return [dict(row) for row in reversed(rows)]

    def last_inbound_at(self, chat: str) -> float | None:
        row = self._db.query_one(
            "SELECT MAX(created_at) FROM messages WHERE chat = ? AND direction = 'in'", (chat,)
        )
        return row[0] if row else None

    def last_inbound_before(self, row_id: int | None) -> float | None:
        """When the newest inbound message before row `row_id` came in (None: none); all of them if `row_id` is None."""
        row = self._db.query_one(
            "SELECT created_at FROM messages WHERE direction = 'in' AND id < ? ORDER BY id DESC LIMIT 1",
            (row_id if row_id is not None else 2**63 - 1,),
        )
        return float(row[0]) if row else None

    def last_sent_at(self) -> float | None:
        """When we last sent a message (a notice included) to any chat."""
        row = self._db.query_one("SELECT created_at FROM messages WHERE direction = 'out' ORDER BY id DESC LIMIT 1")
        return float(row[0]) if row else None

    def pending_count(self) -> int:
        """Inbound messages accepted and not yet answered (waiting for a turn, or held while paused)."""
        row = self._db.query_one(f"SELECT COUNT(*) FROM messages WHERE status = '{PENDING}' AND direction = 'in'")
        return int(row[0]) if row else 0

    def recent_since(self, chat: str, since: float, limit: int) -> list[dict[str, Any]]:
        """The last `limit` messages of a chat (both directions) newer than `since`, oldest first."""
        rows = self._db.query(
            f"""SELECT direction, message_id, channel, sender_id, sender_name, text, created_at, status,
                      payload FROM messages
               WHERE chat = ? AND created_at > ? AND kind <> '{NOTICE}' ORDER BY id DESC LIMIT ?""",
            (chat, since, limit),
        )
        # The admin flag is read here, not with json_extract: PostgreSQL has no JSON functions on a TEXT column.
        return [{**_without_payload(row), "is_admin": _sender_is_admin(row["payload"])} for row in reversed(rows)]

    def search(
        self,
        words: list[str],
        *,
        chat: str,
        person: tuple[str, str] | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        """Messages containing every word (any case), newest first: in `chat`, or with `person`
        (channel, sender id) in every chat that person ever wrote in."""
        where = ["text <> ''", f"kind <> '{NOTICE}'"]
        params: list[str | float] = []
        if person is not None:
            where.append("chat IN (SELECT DISTINCT chat FROM messages WHERE channel = ? AND sender_id = ?)")
            params += list(person)
        else:
            where.append("chat = ?")
            params.append(chat)
        for word in words:
            where.append("text LIKE ? ESCAPE '\\'")
            params.append("%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        if since is not None:
            where.append("created_at >= ?")
            params.append(since)
        if until is not None:
            where.append("created_at < ?")
            params.append(until)
        rows = self._db.query(
            f"""SELECT chat, direction, sender_name, text, created_at FROM messages
                WHERE {" AND ".join(where)} ORDER BY created_at DESC, id DESC LIMIT ?""",
            (*params, limit),
        )
        return [dict(row) for row in rows]

    def inbound_of(self, chat: str, message_id: str | None = None) -> Inbound | None:
        """A stored inbound message as it arrived: the one with `message_id`, else the chat's latest."""
        # The message id's condition only when one is given: PostgreSQL cannot type a bare `? IS NULL`.
        which, params = ("AND message_id = ?", (chat, message_id)) if message_id is not None else ("", (chat,))
        row = self._db.query_one(
            f"""SELECT id, payload FROM messages WHERE chat = ? AND direction = 'in' AND payload IS NOT NULL
               {which} ORDER BY id DESC LIMIT 1""",
            params,
        )
        return inbound_from_json(row["payload"], row_id=row["id"]) if row else None


def _without_payload(row: Row) -> dict[str, Any]:
    return {key: row[key] for key in row.keys() if key != "payload"}


def _sender_is_admin(payload: str | None) -> bool | None:
    """The sender's `is_admin` of a stored inbound payload; None when there is none (an outbound row)."""
    if not payload:
        return None
    try:
        sender = json.loads(payload).get("sender")
    except (ValueError, AttributeError):
        return None
    return bool(sender.get("is_admin")) if isinstance(sender, dict) else None


def inbound_to_json(inbound: Inbound) -> str:
    data = _plain(inbound)
    data.pop("row_id", None)
    return json.dumps(data, ensure_ascii=False)


def _plain(value: Any) -> Any:
    """Dataclasses as dicts, all the way down: what dataclasses.asdict gives, without its deep copies of every leaf."""
    if is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def inbound_from_json(payload: str, row_id: int | None = None) -> Inbound:
    data = json.loads(payload)
    data["sender"] = Sender(**data["sender"])
    data["reply_to"] = Quoted(**data["reply_to"]) if data.get("reply_to") else None
    data["attachments"] = tuple(Attachment(**a) for a in data.get("attachments") or ())
    data["attachment_refs"] = tuple(AttachmentRef(**a) for a in data.get("attachment_refs") or ())
    data["flags"] = tuple(data.get("flags") or ())
    data["press"] = Press(**data["press"]) if data.get("press") else None
    authority = data.get("authority")
    data["authority"] = Authority.of(authority["role"], authority["people"]) if authority else None
    data["row_id"] = row_id
    return Inbound(**data)
