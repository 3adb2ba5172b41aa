"""The owner's read-only SQL: a hostile list of queries is refused, reads work, rows and text are capped."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest

from bicameral.events import Inbound, Sender
from bicameral.store import Stores
from bicameral.store.query import QueryRefused, run_readonly, validate

HOSTILE = [
    ("PRAGMA user_version = 99", "PRAGMA"),
    ("PRAGMA table_info(messages)", "PRAGMA"),
    ("ATTACH DATABASE '/tmp/evil.db' AS evil", "ATTACH"),
    ("DETACH DATABASE main", "DETACH"),
    ("DELETE FROM messages", "DELETE"),
    ("UPDATE messages SET text = 'x'", "UPDATE"),
    ("INSERT INTO kv VALUES ('a', 'b')", "INSERT"),
    ("REPLACE INTO kv VALUES ('a', 'b')", "only SELECT is allowed; this is REPLACE"),
    ("DROP TABLE messages", "DROP"),
    ("CREATE TABLE t (x)", "CREATE"),
    ("ALTER TABLE messages ADD COLUMN y", "this is ALTER"),
    ("VACUUM", "this is VACUUM"),
    ("VACUUM INTO '/tmp/copy.db'", "VACUUM"),
    ("BEGIN; DELETE FROM messages; COMMIT", "one statement"),
    ("SELECT 1; SELECT 2", "one statement"),
    ("SELECT 1; DROP TABLE messages", "one statement"),
    ("SELECT * FROM messages; -- trailing\nDELETE FROM kv", "one statement"),
    ("WITH gone AS (DELETE FROM messages RETURNING *) SELECT * FROM gone", "DELETE"),
    ("WITH a AS (SELECT 1), b AS (UPDATE kv SET value = 'x' RETURNING *) SELECT * FROM a", "UPDATE"),
    ("SELECT * FROM (SELECT * FROM (INSERT INTO kv VALUES (1, 2) RETURNING *))", "INSERT|not valid SQL"),
    ("SELECT load_extension('/tmp/evil.so')", "load_extension"),
    ("SELECT readfile('/etc/passwd')", "readfile"),
    ("SELECT writefile('/tmp/x', 'y')", "writefile"),
    ("SELECT zeroblob(1000000000)", "zeroblob"),
    ("SELECT randomblob(1000000000)", "randomblob"),
    ("SELECT fts3_tokenizer('simple')", "fts3_tokenizer"),
    ("SELECT * FROM pragma_table_info('messages')", "pragma_table_info"),
    ("SELECT name FROM messages WHERE id IN (SELECT load_extension('x'))", "load_extension"),
    ("select LOAD_EXTENSION('x')", "load_extension"),
    ("SELECT * FROM", "not valid SQL"),
    ("", "one statement"),
    ("   ;  ", "one statement"),
    ("SELECT 1 " + "x" * 20_000, "characters"),
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory):
    opened = Stores.open(tmp_path_factory.mktemp("sql") / "data" / "bicameral.db")
    ada = Sender("1", "Ada")
    inbound = Inbound(channel="telegram", chat="telegram:1", message_id="1", sender=ada, text="hello " * 1000, ts=0)
    for _ in range(150):
        opened.messages.record_inbound(inbound)
    yield opened
    opened.close()


@pytest.mark.parametrize(("sql", "reason"), HOSTILE)
def test_hostile_queries_are_refused_with_a_reason(stores: Stores, sql: str, reason: str) -> None:
    with pytest.raises(QueryRefused, match=reason):
        validate(sql)
    with pytest.raises(QueryRefused):
        run_readonly(stores.db.path, sql)
    assert stores.db.query_one("SELECT COUNT(*) FROM messages")[0] == 150
    assert stores.db.query_one("PRAGMA user_version")[0] >= 6


def test_reads_work_with_ctes_unions_and_the_schema(stores: Stores) -> None:
    result = run_readonly(
        stores.db.path,
        "WITH per AS (SELECT chat, COUNT(*) AS n FROM messages GROUP BY chat) SELECT chat, n FROM per "
        "UNION ALL SELECT 'tables', COUNT(*) FROM sqlite_master WHERE type = 'table'",
    )
    assert result.columns == ["chat", "n"]
    assert result.rows[0] == ("telegram:1", 150)


def test_rows_and_text_are_capped(stores: Stores) -> None:
    result = run_readonly(stores.db.path, "SELECT id, text FROM messages")
    assert len(result.rows) == 100 and result.more
    assert all(len(text) <= 2001 and text.endswith("…") for _, text in result.rows)


def test_a_runaway_query_is_stopped(stores: Stores) -> None:
    ticks = iter(range(1_000_000))
    with pytest.raises(QueryRefused, match="ran longer"):
        run_readonly(
            stores.db.path,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
            max_seconds=5,
            clock=lambda: float(next(ticks)),
        )


def test_the_connection_itself_cannot_write_even_past_the_parser(stores: Stores, monkeypatch) -> None:
    """If the parser ever let a write through, the read-only connection and authorizer still refuse it."""
    monkeypatch.setattr("bicameral.store.query.validate", lambda sql: sql)
    for sql in ("DELETE FROM messages", "PRAGMA user_version = 1", "ATTACH ':memory:' AS x"):
        with pytest.raises(QueryRefused, match="refused"):
            run_readonly(stores.db.path, sql)
    assert stores.db.query_one("SELECT COUNT(*) FROM messages")[0] == 150


# --- what one query may build: SQLite's limits and the step budget on the read-only connection ---

MIB = 1 << 20
GROWTH = [
    # A value built past the limit: refused at once, never allocated.
    "SELECT length(replace(printf('%.*c', 100000, 'x'), 'x', printf('%.*c', 10000, 'y')))",
    "WITH RECURSIVE d(x) AS (SELECT 'ab' UNION ALL SELECT x || x FROM d) SELECT length(x) FROM d ORDER BY 1 DESC LIMIT 1",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 3000000) SELECT length(group_concat(x)) FROM c",
    "SELECT length(substr(replace(hex(printf('%.*c', 600000, 'x')), '7', 'seven'), 1, 10))",
]


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """This process's highest RSS while the block runs, sampled on a thread: [before, peak] after it."""
    me = psutil.Process(os.getpid())
    figures = [me.memory_info().rss, 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            figures[1] = max(figures[1], me.memory_info().rss)
            stop.wait(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield figures
    finally:
        stop.set()
        sampler.join()


@pytest.mark.parametrize("sql", GROWTH)
def test_a_value_built_past_the_limit_is_refused_as_too_large(stores: Stores, sql: str) -> None:
    with peak_rss() as figures, pytest.raises(QueryRefused, match="the result was too large"):
        run_readonly(stores.db.path, sql)
    before, peak = figures
    assert peak - before < 64 * MIB, f"RSS grew by {(peak - before) / MIB:.0f} MiB"


def test_a_huge_printf_never_allocates_it(stores: Stores) -> None:
    # SQLite's printf answers NULL rather than an error when its text would pass the limit: either way
    # the 900 MB are never allocated.
    with peak_rss() as figures:
        try:
            result = run_readonly(stores.db.path, "SELECT printf('%.*c', 900000000, 'x') AS big")
            assert result.rows == [(None,)]
        except QueryRefused as exc:
            assert "too large" in str(exc)
    before, peak = figures
    assert peak - before < 64 * MIB, f"RSS grew by {(peak - before) / MIB:.0f} MiB"


def test_the_widest_row_stays_bounded(stores: Stores) -> None:
    """Every column at the largest value allowed: what one row can hold is the limit times the columns."""
    wide = ", ".join(f"printf('%.*c', 900000, 'x') AS c{i}" for i in range(64))
    with peak_rss() as figures:
        result = run_readonly(stores.db.path, f"SELECT {wide}")
    assert len(result.columns) == 64 and all(len(str(v)) == 2001 for v in result.rows[0])
    before, peak = figures
    assert peak - before < 200 * MIB, f"RSS grew by {(peak - before) / MIB:.0f} MiB"
    with pytest.raises(QueryRefused, match="too many columns"):
        run_readonly(stores.db.path, f"SELECT {wide}, 1")


def test_a_query_past_its_step_budget_is_stopped_as_taking_too_long(stores: Stores) -> None:
    with pytest.raises(QueryRefused, match="the query took too long"):
        run_readonly(
            stores.db.path,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
            max_steps=2_000_000,
        )
    assert run_readonly(stores.db.path, "SELECT count(*) FROM messages", max_steps=2_000_000).rows == [(150,)]


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (" UNION ALL ".join(["SELECT 1"] * 30), "too many terms in compound SELECT"),
        ("SELECT 'x' LIKE '" + "%" * 1200 + "'", "pattern too complex"),
        ("SELECT coalesce(" + ", ".join(["NULL"] * 40) + ")", "too many arguments"),
    ],
)
def test_sqlite_limits_bound_the_shape_of_a_query(stores: Stores, sql: str, reason: str) -> None:
    with pytest.raises(QueryRefused, match=reason):
        run_readonly(stores.db.path, sql)


def test_the_stored_data_still_reads_under_the_limits(stores: Stores) -> None:
    result = run_readonly(stores.db.path, "SELECT t.*, m.* FROM tasks t, messages m LIMIT 1")
    assert result.rows == [] and len(result.columns) > 30
    assert run_readonly(stores.db.path, "SELECT length(text) FROM messages LIMIT 1").rows == [(6000,)]
