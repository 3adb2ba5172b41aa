"""Opening the database: migrations run only when the schema is behind, and committed rows survive."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path

from bicameral.store.db import Database

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
