"""Rate limits: counted per key and minute, told once, and old minutes cleared."""

from __future__ import annotations

from pathlib import Path

from bicameral.gate.ratelimit import RateLimiter, Verdict
from bicameral.store.db import Database
from bicameral.store.ratelimits import RateLimitStore
from bicameral.store.sql import SqlDatabase


def test_over_the_limit_warns_once_then_stays_silent_until_the_next_minute(database: SqlDatabase) -> None:
    now = [600.0]
    limiter = RateLimiter(RateLimitStore(database), per_minute=2, clock=lambda: now[0])
    assert [limiter.check("alice") for _ in range(4)] == [Verdict.ALLOW, Verdict.ALLOW, Verdict.WARN, Verdict.SILENT]
    assert limiter.check("bob") is Verdict.ALLOW  # per key
    now[0] += 60
    assert limiter.check("alice") is Verdict.ALLOW


def test_minutes_older_than_five_are_cleared_once_a_minute(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    store = RateLimitStore(db)
    for bucket in range(10):
        store.hit("alice", bucket)
        store.hit("bob", bucket)
    assert sorted({r["bucket"] for r in db.query("SELECT bucket FROM rate_limits")}) == [4, 5, 6, 7, 8, 9]
    statements: list[str] = []
    db._conn.set_trace_callback(statements.append)
    store.hit("carol", 9)  # the same minute: nothing to clear again
    assert not [s for s in statements if s.startswith("DELETE")]
