"""The tests' PostgreSQL (tests/support/postgres.py): a real server, fresh databases, a password it checks."""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg
import pytest

pytestmark = pytest.mark.slow


def _database_of(url: str) -> str:
    with psycopg.connect(url, connect_timeout=30) as connection:
        row = connection.execute("SELECT current_database(), current_setting('listen_addresses')").fetchone()
    assert row is not None
    assert row[1] == "127.0.0.1"
    return str(row[0])


def test_the_server_answers_on_loopback_with_its_password(postgres):
    url = postgres.url()
    parts = urlsplit(url)
    assert (parts.scheme, parts.hostname, parts.port, parts.username) == ("postgresql", "127.0.0.1", postgres.port, "bicameral")
    assert _database_of(url) == "postgres"


def test_each_fresh_database_is_new_and_empty(postgres):
    first, second = postgres.fresh_url(), postgres.fresh_url()
    assert first != second
    with psycopg.connect(first, autocommit=True) as connection:
        connection.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL)")
        connection.execute("INSERT INTO notes VALUES (1, 'only in the first')")
    with psycopg.connect(second) as connection:
        tables = connection.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == (0,)
    assert _database_of(second) == urlsplit(second).path.lstrip("/")
    for url in (first, second):
        postgres.drop_database(urlsplit(url).path.lstrip("/"))


def test_the_function_fixture_gives_a_database_of_its_own(postgres_url):
    with psycopg.connect(postgres_url) as connection:
        tables = connection.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == (0,)


def test_a_wrong_password_is_refused_by_the_server(postgres):
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(postgres.url(password="not-the-password"), connect_timeout=30)
    # No password at all: the server asks for one (TCP logins are never trusted), and libpq has none to give.
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(postgres.url(password=""), connect_timeout=30)


def test_a_dropped_database_is_gone_even_with_a_connection_left_open(postgres):
    name = postgres.fresh_name()
    url = postgres.create_database(name)
    left_open = psycopg.connect(url)
    try:
        postgres.drop_database(name)
        with pytest.raises(psycopg.OperationalError, match="does not exist"):
            psycopg.connect(url, connect_timeout=30)
    finally:
        left_open.close()
