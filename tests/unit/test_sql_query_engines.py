"""The owner's read-only SQL on both engines (a real PostgreSQL): reads work, caps hold, every write is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from bicameral.events import Inbound, Sender
from bicameral.store import Stores
from bicameral.store.query import QueryRefused, run_readonly


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request, tmp_path: Path):
    location = request.getfixturevalue("postgres_url") if request.param == "postgresql" else tmp_path / "bicameral.db"
    opened = Stores.open(location, data_dir=tmp_path)
    ada = Sender("1", "Ada")
    for n in range(120):
        opened.messages.record_inbound(
            Inbound(channel="telegram", chat="telegram:1", message_id=str(n), sender=ada, text="hello% " * 500, ts=n)
        )
    yield opened
    opened.close()


def _count(stores: Stores) -> int:
    row = stores.db.query_one("SELECT COUNT(*) FROM messages")
    assert row is not None
    return int(row[0])


def test_a_select_works_with_ctes_and_caps(stores: Stores) -> None:
    result = run_readonly(
        stores.db, "WITH per AS (SELECT chat, COUNT(*) AS n FROM messages GROUP BY chat) SELECT chat, n FROM per"
    )
    assert result.columns == ["chat", "n"] and result.rows == [("telegram:1", 120)]
    capped = run_readonly(stores.db, "SELECT id, text FROM messages WHERE text LIKE 'hello%' ORDER BY id")
    assert len(capped.rows) == 100 and capped.more
    assert all(len(text) == 2001 and text.endswith("…") for _, text in capped.rows)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO kv (key, value) VALUES ('a', 'b')",
        "UPDATE messages SET text = 'x'",
        "DROP TABLE messages",
        "DELETE FROM messages",
        "WITH gone AS (DELETE FROM messages RETURNING *) SELECT * FROM gone",
        "WITH b AS (UPDATE messages SET text = 'x' RETURNING *) SELECT COUNT(*) FROM b",
        "SELECT pg_sleep(60)",
        "SELECT set_config('default_transaction_read_only', 'off', false)",
        "SELECT pg_terminate_backend(1)",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT repeat('x', 900000000)",
        "SELECT nextval('messages_rowid_seq')",
        "SELECT 1; DELETE FROM messages",
    ],
)
def test_writes_and_escapes_are_refused(stores: Stores, sql: str) -> None:
    with pytest.raises(QueryRefused):
        run_readonly(stores.db, sql)
    assert _count(stores) == 120


def test_a_long_query_is_stopped_at_the_timeout(stores: Stores) -> None:
    heavy = "SELECT COUNT(*) FROM messages a, messages b, messages c, messages d, messages e"
    with pytest.raises(QueryRefused, match="too long"):
        run_readonly(stores.db, heavy, max_seconds=0.2)
    assert run_readonly(stores.db, "SELECT COUNT(*) FROM messages").rows == [(120,)]  # the next one runs


def test_on_postgresql_the_server_refuses_a_write_that_got_past_the_parser(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bicameral.store import query, query_postgres

    monkeypatch.setattr(query, "validate", lambda sql: sql)  # as if the parser missed it
    monkeypatch.setattr(query_postgres, "why_not_on_postgres", lambda sql: None)
    opened = Stores.open(postgres_url, data_dir=tmp_path)
    try:
        opened.kv.set("kept", "yes")
        for sql in ["SELECT set_config('transaction_read_only', 'off', true)", "SELECT nextval('messages_rowid_seq')"]:
            with pytest.raises(QueryRefused, match="refused it"):
                run_readonly(opened.db, sql)
        assert opened.kv.get("kept") == "yes"
    finally:
        opened.close()


def test_an_error_never_shows_the_password(postgres_url: str, tmp_path: Path) -> None:
    opened = Stores.open(postgres_url, data_dir=tmp_path)
    try:
        password = postgres_url.split("@", 1)[0].rsplit(":", 1)[1]
        opened.db.url = postgres_url.replace(password, "wrong-" + password)  # type: ignore[attr-defined]
        with pytest.raises(QueryRefused) as refused:
            run_readonly(opened.db, "SELECT 1")
        assert password not in str(refused.value) and "could not be reached" in str(refused.value)
    finally:
        opened.close()
