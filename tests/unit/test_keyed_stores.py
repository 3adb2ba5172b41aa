"""The stores keyed by one name (kv, channel cursors, sessions), on both engines: kept, replaced, and undone with
the transaction they were written in."""

from __future__ import annotations

import pytest

from bicameral.store.cursors import CursorStore
from bicameral.store.kv import KeyValueStore
from bicameral.store.sessions import SessionStore
from bicameral.store.sql import SqlDatabase


def test_a_value_is_kept_replaced_and_deleted(database: SqlDatabase) -> None:
    kv = KeyValueStore(database)
    assert kv.get("a") is None
    kv.set("a", "1")
    kv.set("a", "2")
    kv.set("b", "100%")  # a percent sign is a value, not a placeholder
    assert (kv.get("a"), kv.get("b")) == ("2", "100%")
    kv.delete("a")
    assert kv.get("a") is None


def test_a_cursor_written_in_a_failed_batch_is_undone_with_it(database: SqlDatabase) -> None:
    cursors = CursorStore(database, clock=lambda: 5.0)
    cursors.set("matrix", "s1")
    with pytest.raises(RuntimeError), database.tx():
        cursors.set("matrix", "s2")
        raise RuntimeError("the batch failed")
    assert cursors.get("matrix") == "s1"
    cursors.set("matrix", "s3")
    assert cursors.get("matrix") == "s3" and cursors.get("telegram") is None


def test_a_session_is_saved_whole_and_cleared(database: SqlDatabase) -> None:
    sessions = SessionStore(database, clock=lambda: 1.0)
    sessions.save("telegram:1", [{"role": "user", "content": "hi"}])
    sessions.save("telegram:1", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert [m["content"] for m in sessions.load("telegram:1")] == ["hi", "hello"]
    sessions.clear("telegram:1")
    assert sessions.load("telegram:1") == []
