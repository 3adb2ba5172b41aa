"""Storage: the only place SQL is written; one module per table family."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bicameral.store.db import Database
from bicameral.store.instructions import Instructions
from bicameral.store.kv import KeyValueStore
from bicameral.store.learnings import Learnings
from bicameral.store.memory import Memory
from bicameral.store.messages import MessageStore
from bicameral.store.ratelimits import RateLimitStore
from bicameral.store.sessions import SessionStore
from bicameral.store.tool_calls import ToolCallStore
from bicameral.store.unauthorized import UnauthorizedStore


@dataclass
class Stores:
    db: Database
    messages: MessageStore
    sessions: SessionStore
    tool_calls: ToolCallStore
    unauthorized: UnauthorizedStore
    ratelimits: RateLimitStore
    kv: KeyValueStore
    memory: Memory
    instructions: Instructions
    learnings: Learnings

    @classmethod
    def open(cls, path: Path | str, committed_memory: Path | None = None) -> Stores:
        """The stores of one database; memory and instruction files live beside it (plus, optionally, a
        read-only committed memory folder)."""
        db = Database(path)
        beside = Path(path).parent
        return cls(
            db=db,
            messages=MessageStore(db),
            sessions=SessionStore(db),
            tool_calls=ToolCallStore(db),
            unauthorized=UnauthorizedStore(db),
            ratelimits=RateLimitStore(db),
            kv=KeyValueStore(db),
            memory=Memory(db, beside / "memory", committed=committed_memory),
            instructions=Instructions(beside / "instructions"),
            learnings=Learnings(beside / "self" / "learnings.md"),
        )

    def close(self) -> None:
        self.db.close()
