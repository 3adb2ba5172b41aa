"""PostgreSQL going away between statements: the next transaction or read goes on a new connection, once; a
transaction the loss cut short fails whole, and nothing of it is kept or written twice."""

from __future__ import annotations

import psycopg
import pytest

from bicameral.store import open_database
from bicameral.store.sql import OperationalError, SqlDatabase


def drop_connections(url: str) -> int:
    """What a server restart or a failover does to every open connection of this database: ends it."""
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def db(postgres_url: str):
    opened = open_database(postgres_url)
    yield opened
    opened.close()


def kv(db: SqlDatabase) -> dict[str, str]:
    return {row["key"]: row["value"] for row in db.query("SELECT key, value FROM kv")}


def test_a_read_a_transaction_and_a_lone_write_each_go_on_a_new_connection(db: SqlDatabase, postgres_url: str) -> None:
    assert drop_connections(postgres_url) == 1
    assert kv(db) == {}  # a read
    assert drop_connections(postgres_url) == 1
    with db.tx() as conn:  # a transaction: its BEGIN found the connection gone
        conn.execute("INSERT INTO kv (key, value) VALUES (?, ?)", ("a", "1"))
    assert drop_connections(postgres_url) == 1
    db.execute("INSERT INTO kv (key, value) VALUES (?, ?)", ("b", "2"))  # a write of its own
    assert kv(db) == {"a": "1", "b": "2"}


def test_a_transaction_cut_short_fails_whole_and_the_next_one_works(db: SqlDatabase, postgres_url: str) -> None:
    with pytest.raises(OperationalError), db.tx() as conn:
        conn.execute("INSERT INTO kv (key, value) VALUES (?, ?)", ("half", "done"))
        drop_connections(postgres_url)
        conn.execute("INSERT INTO kv (key, value) VALUES (?, ?)", ("other", "half"))
    with db.tx() as conn:
        conn.execute("INSERT INTO kv (key, value) VALUES (?, ?)", ("after", "ok"))
    assert kv(db) == {"after": "ok"}  # nothing of the cut transaction kept


def test_a_server_that_stays_away_is_an_operational_error_and_the_password_is_not_in_it(postgres) -> None:
    url = postgres.fresh_url()
    db = open_database(url)
    try:
        postgres.drop_database(url.rsplit("/", 1)[1])  # ends the connection, and there is nothing to reconnect to
        with pytest.raises(OperationalError) as failed:
            db.query("SELECT 1")
        assert postgres.password not in str(failed.value)
    finally:
        db.close()
