"""Storage: the only place SQL is written; one module per table family."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bicameral.store.db import Database
from bicameral.store.kv import KeyValueStore
from bicameral.store.messages import MessageStore
from bicameral.store.outbox import OutboxStore
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
    outbox: OutboxStore

    @classmethod
    def open(cls, path: Path | str) -> Stores:
        db = Database(path)
        return cls(
            db=db,
            messages=MessageStore(db),
            sessions=SessionStore(db),
            tool_calls=ToolCallStore(db),
            unauthorized=UnauthorizedStore(db),
            ratelimits=RateLimitStore(db),
            kv=KeyValueStore(db),
            outbox=OutboxStore(db),
        )

    def close(self) -> None:
        self.db.close()
