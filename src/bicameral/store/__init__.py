"""Storage: the only place SQL is written; one module per table family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bicameral.redaction import scrub
from bicameral.store.caps import CapStore
from bicameral.store.cursors import CursorStore
from bicameral.store.db import Database
from bicameral.store.instructions import Instructions
from bicameral.store.kv import KeyValueStore
from bicameral.store.learnings import Learnings
from bicameral.store.memory import Memory
from bicameral.store.messages import MessageStore
from bicameral.store.outbox import OutboxStore
from bicameral.store.pairing import PairingStore
from bicameral.store.ratelimits import RateLimitStore
from bicameral.store.schedules import ScheduleStore
from bicameral.store.sessions import SessionStore
from bicameral.store.skills import Skills
from bicameral.store.sql import SqlDatabase
from bicameral.store.tool_calls import ToolCallStore
from bicameral.store.unauthorized import UnauthorizedStore
from bicameral.store.usage import UsageStore


@dataclass
class Stores:
    db: SqlDatabase
    messages: MessageStore
    sessions: SessionStore
    tool_calls: ToolCallStore
    unauthorized: UnauthorizedStore
    ratelimits: RateLimitStore
    kv: KeyValueStore
    outbox: OutboxStore
    memory: Memory
    instructions: Instructions
    learnings: Learnings
    schedules: ScheduleStore
    usage: UsageStore
    pairing: PairingStore
    caps: CapStore
    cursors: CursorStore  # each channel's position on its platform (Matrix's sync token)
    skills: Skills  # the shipped skills and the owner's (read when first asked for)
    redact: Callable[[str], str] = field(default=scrub)  # applied to model and tool output before it is stored

    @classmethod
    def open(
        cls, path: Path | str, redact: Callable[[str], str] = scrub, committed_memory: Path | None = None,
        *, data_dir: Path | None = None,
    ) -> Stores:
        """The stores of one database (a SQLite file or a PostgreSQL URL); memory and instruction files live in
        `data_dir`, by default the SQLite file's folder (plus, optionally, a read-only committed memory folder)."""
        db = open_database(path)
        beside = data_dir if data_dir is not None else Path(path).parent
        return cls(
            db=db,
            messages=MessageStore(db, redact=redact),
            sessions=SessionStore(db, redact=redact),
            tool_calls=ToolCallStore(db, redact=redact),
            unauthorized=UnauthorizedStore(db),
            ratelimits=RateLimitStore(db),
            kv=KeyValueStore(db),
            outbox=OutboxStore(db, redact=redact),
            memory=Memory(db, beside / "memory", committed=committed_memory),
            instructions=Instructions(beside / "instructions"),
            learnings=Learnings(beside / "self" / "learnings.md"),
            schedules=ScheduleStore(db),
            usage=UsageStore(db),
            pairing=PairingStore(db),
            caps=CapStore(db),
            cursors=CursorStore(db),
            skills=Skills(beside / "skills"),
            redact=redact,
        )

    def close(self) -> None:
        self.db.close()


def is_database_url(location: Path | str) -> bool:
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def open_database(location: Path | str) -> SqlDatabase:
    """SQLite for a path, PostgreSQL for a postgresql:// URL (psycopg and sqlglot load only then)."""
    if is_database_url(location):
        from bicameral.store.postgres import PostgresDatabase

        return PostgresDatabase(str(location))
    return Database(location)
