"""Read-only SQL over the assistant's own database, for the owner's cross-session questions.

Three fences, each enough on its own for the common cases: the text is parsed with sqlglot and
must be one SELECT (CTEs and subqueries walked, writes, PRAGMA, ATTACH and dangerous functions
refused); it runs on a separate `mode=ro` connection; and an SQLite authorizer allows nothing but
reads and harmless functions. A progress handler bounds the time, and rows and text are capped.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_ROWS = 100
MAX_TEXT = 2000
MAX_SECONDS = 5.0
MAX_SQL_CHARS = 10_000

DENIED_FUNCTIONS = frozenset(
    "load_extension readfile writefile edit fts3_tokenizer zeroblob randomblob sqlite_compileoption_get "
    "sqlite_compileoption_used sqlite_offset".split()
)

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


class QueryRefused(ValueError):
    """A query that is not one plain read; the message says why."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[object, ...]]
    more: bool  # rows were cut at the cap


def validate(sql: str) -> str:
    """The query if it is one read-only SELECT, else QueryRefused naming the reason."""
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRefused(f"the query is {len(sql)} characters; at most {MAX_SQL_CHARS}")
    # sqlglot (~8 MB) loads with the first query, not with the assistant.
    from bicameral.store.sql_check import check_select

    check_select(sql)
    return sql


def run_readonly(
    db_path: Path, sql: str, *, max_rows: int = MAX_ROWS, max_text: int = MAX_TEXT, max_seconds: float = MAX_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> QueryResult:
    """Validate and run the query on a read-only connection; values are cut to `max_text` characters."""
    validate(sql)
    conn = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.set_authorizer(_authorize)
        deadline = clock() + max_seconds
        conn.set_progress_handler(lambda: int(clock() > deadline), 10_000)
        try:
            cursor = conn.execute(sql)
            fetched = cursor.fetchmany(max_rows + 1)
        except sqlite3.DatabaseError as exc:
            if "interrupted" in str(exc):
                raise QueryRefused(f"the query ran longer than {max_seconds:g}s and was stopped") from None
            raise QueryRefused(f"the database refused it: {exc}") from None
        columns = [d[0] for d in cursor.description or ()]
        rows = [tuple(_cell(v, max_text) for v in row) for row in fetched[:max_rows]]
        return QueryResult(columns, rows, more=len(fetched) > max_rows)
    finally:
        conn.close()


def _authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _cell(value: object, max_text: int) -> object:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > max_text:
        return value[:max_text] + "…"
    return value
