"""Opening the database: migrations run only when the schema is behind, and committed rows survive."""

from __future__ import annotations

import sqlite3
import threading
from importlib import resources
from pathlib import Path

from bicameral.store import db as db_module
from bicameral.store.db import Database
from tests.support.chat import eventually_blocking

LATEST = max(int(e.name[:3]) for e in resources.files("bicameral.store").joinpath("migrations").iterdir()
             if e.name.endswith(".sql"))


def _user_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def test_a_fresh_database_gets_every_migration(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    assert db.migrate() == LATEST
    db.close()
    assert _user_version(tmp_path / "db.sqlite") == LATEST


def test_a_database_behind_is_brought_up_to_date_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    first = resources.files("bicameral.store").joinpath("migrations", "001_init.sql").read_text(encoding="utf-8")
    with sqlite3.connect(path) as conn:  # a database as the first release left it
        conn.executescript(first)
        conn.execute("CREATE TABLE keepsake (v TEXT)")
        conn.execute("INSERT INTO keepsake VALUES ('still here')")
        conn.execute("PRAGMA user_version=1")
    reopened = Database(path)
    assert [tuple(r) for r in reopened.query("SELECT v FROM keepsake")] == [("still here",)]
    assert reopened.query("SELECT count(*) FROM tasks")[0][0] == 0  # from a later migration
    reopened.close()
    assert _user_version(path) == LATEST


def test_reopening_a_current_database_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    Database(path).close()
    before = path.read_bytes()
    Database(path).close()
    assert _user_version(path) == LATEST and path.read_bytes() == before


def _values(db: Database) -> list[str]:
    return [row[0] for row in db.query("SELECT v FROM t ORDER BY rowid")]


def test_a_transaction_inside_another_commits_with_it(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    db.execute("CREATE TABLE t (v TEXT)")
    with db.tx() as conn:
        conn.execute("INSERT INTO t VALUES ('outer')")
        with db.tx() as inner:
            inner.execute("INSERT INTO t VALUES ('inner')")
        # Nothing is committed yet: another connection sees neither row.
        with sqlite3.connect(tmp_path / "db.sqlite") as other:
            assert other.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    assert _values(db) == ["outer", "inner"]


def test_a_failed_inner_transaction_undoes_only_its_own_writes(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    db.execute("CREATE TABLE t (v TEXT)")
    with db.tx() as conn:
        conn.execute("INSERT INTO t VALUES ('kept')")
        try:
            with db.tx() as inner:
                inner.execute("INSERT INTO t VALUES ('undone')")
                raise ValueError("a poisoned message")
        except ValueError:
            pass
        with db.tx() as inner:
            inner.execute("INSERT INTO t VALUES ('after')")
    assert _values(db) == ["kept", "after"]


def test_a_failed_outer_transaction_undoes_its_finished_inner_ones(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    db.execute("CREATE TABLE t (v TEXT)")
    try:
        with db.tx():
            with db.tx() as inner:
                inner.execute("INSERT INTO t VALUES ('inner')")
            raise OSError("disk full")
    except OSError:
        pass
    assert _values(db) == []
    with db.tx() as conn:  # and the connection is usable again, at the top level
        conn.execute("INSERT INTO t VALUES ('next')")
    assert _values(db) == ["next"]


def _in_database_file(path: Path) -> list[str]:
    """The kv keys in the database file itself, ignoring the WAL: what a checkpoint has copied there."""
    with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as conn:
        return [row[0] for row in conn.execute("SELECT key FROM kv ORDER BY key")]


def test_commits_never_checkpoint_but_a_thread_of_its_own_does(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "db.sqlite"
    Database(path).close()  # migrated: opening it again commits nothing
    monkeypatch.setattr(db_module, "CHECKPOINT_EVERY", 3)
    db = Database(path)
    try:
        assert db.query_one("PRAGMA wal_autocheckpoint")[0] == 0
        committed = _in_database_file(path)
        for key in ("a", "b"):
            with db.tx() as conn:
                conn.execute("INSERT INTO kv (key, value) VALUES (?, '1')", (key,))
        assert _in_database_file(path) == committed  # still only in the WAL, and no thread yet
        assert db._checkpointer is None
        db.execute("INSERT INTO kv (key, value) VALUES ('c', '1')")  # a third commit, outside a transaction
        checkpointer = db._checkpointer
        assert checkpointer is not None
        eventually_blocking(lambda: checkpointer.done == 1, "the checkpoint (in its own thread)", timeout=30)
        assert _in_database_file(path) == ["a", "b", "c"]
        assert checkpointer._thread.name == "sqlite-checkpoint" and checkpointer._thread.is_alive()
    finally:
        db.close()
    assert not checkpointer._thread.is_alive()  # closing stops it


def test_an_in_memory_database_has_no_checkpoints(monkeypatch) -> None:
    monkeypatch.setattr(db_module, "CHECKPOINT_EVERY", 1)
    db = Database(":memory:")
    with db.tx() as conn:
        conn.execute("INSERT INTO kv (key, value) VALUES ('a', '1')")
    assert db._checkpointer is None
    db.close()


def test_a_failed_checkpoint_is_logged_and_the_next_one_still_runs(tmp_path: Path, monkeypatch, caplog) -> None:
    path = tmp_path / "db.sqlite"
    Database(path).close()
    monkeypatch.setattr(db_module, "CHECKPOINT_EVERY", 1)
    db = Database(path)
    real_connect = sqlite3.connect
    failures = [sqlite3.OperationalError("disk I/O error")]

    class _Failing:
        """The checkpointer's connection, failing its first checkpoint as a bad disk would."""

        def __init__(self, conn: sqlite3.Connection) -> None:
            self._conn = conn

        def execute(self, sql: str, *args):
            if "wal_checkpoint" in sql and failures:
                raise failures.pop()
            return self._conn.execute(sql, *args)

        def close(self) -> None:
            self._conn.close()

    def connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        return _Failing(conn) if threading.current_thread().name == "sqlite-checkpoint" else conn

    monkeypatch.setattr(db_module.sqlite3, "connect", connect)
    try:
        db.execute("INSERT INTO kv (key, value) VALUES ('a', '1')")
        checkpointer = db._checkpointer
        assert checkpointer is not None
        eventually_blocking(lambda: checkpointer.done == 1, "the failed checkpoint", timeout=30)
        assert "database checkpoint failed" in caplog.text and "disk I/O error" in caplog.text
        assert _in_database_file(path) == []  # nothing copied yet
        db.execute("INSERT INTO kv (key, value) VALUES ('b', '1')")
        eventually_blocking(lambda: checkpointer.done == 2, "the next checkpoint", timeout=30)
        assert _in_database_file(path) == ["a", "b"]
        assert db.query_one("SELECT value FROM kv WHERE key = 'b'")[0] == "1"  # the database kept serving
    finally:
        db.close()
