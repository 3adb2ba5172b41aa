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
from bicameral.store.tool_calls import ToolCallStore
from bicameral.store.unauthorized import UnauthorizedStore
from bicameral.store.usage import UsageStore


@dataclass
class Stores:
    db: Database
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
        cls, path: Path | str, redact: Callable[[str], str] = scrub, committed_memory: Path | None = None
    ) -> Stores:
        """The stores of one database; memory and instruction files live beside it (plus, optionally, a
        read-only committed memory folder)."""
        db = Database(path)
        beside = Path(path).parent
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
