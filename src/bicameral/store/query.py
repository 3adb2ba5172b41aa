"""Read-only SQL over the assistant's own database, for the owner's cross-session questions.

Three fences, each enough on its own for the common cases: the text is parsed with sqlglot and
must be one SELECT (CTEs and subqueries walked, writes, PRAGMA, ATTACH and dangerous functions
refused); it runs on a separate `mode=ro` connection; and an SQLite authorizer allows nothing but
reads and harmless functions. What one query may build is bounded too: SQLite's limits on that
connection cap every string or blob (so `printf('%.*c', 900000000, 'x')` or a runaway `replace` fails
at once instead of allocating it), the columns, the expression depth and the like; a progress handler
stops it after a budget of VM steps or of time; rows are fetched one at a time and their text cut.
On PostgreSQL the same validated query runs in `query_postgres` (a READ ONLY transaction, a statement_timeout).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from bicameral.store.query_types import QueryRefused, QueryResult, cell
from bicameral.store.sql import SqlDatabase

__all__ = ["MAX_ROWS", "MAX_SQL_CHARS", "QueryRefused", "QueryResult", "run_readonly", "validate"]

MAX_ROWS = 100
MAX_TEXT = 2000
MAX_SECONDS = 5.0
MAX_STEPS = 100_000_000  # SQLite VM instructions: a few seconds of work, far more than any question needs
MAX_SQL_CHARS = 10_000
# The largest string or blob a query may read or build. A transcript, the largest thing stored, is what a
# model read, which its context window keeps well under this; one value this size in each of the most
# columns a result may have is the most one row can hold.
MAX_VALUE_BYTES = 1_000_000
_STEPS_PER_CHECK = 10_000

# SQLite's defaults are a billion bytes a value, 2000 columns, expressions 1000 deep, 500 SELECTs in a
# compound, 50 000-byte LIKE patterns, 127 function arguments: each far past any question about our
# own tables, and each a way to make one query cost memory or time.
_LIMITS = {
    sqlite3.SQLITE_LIMIT_LENGTH: MAX_VALUE_BYTES,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 4 * MAX_SQL_CHARS,  # bytes: at most four a character in UTF-8
    sqlite3.SQLITE_LIMIT_COLUMN: 64,  # the widest table has 20; a result, an index or an ORDER BY no more
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 20,
    sqlite3.SQLITE_LIMIT_VDBE_OP: 50_000,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 16,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 1000,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 1,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}

DENIED_FUNCTIONS = frozenset(
    "load_extension readfile writefile edit fts3_tokenizer zeroblob randomblob sqlite_compileoption_get "
    "sqlite_compileoption_used sqlite_offset".split()
)

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


def validate(sql: str) -> str:
    """The query if it is one read-only SELECT, else QueryRefused naming the reason."""
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRefused(f"the query is {len(sql)} characters; at most {MAX_SQL_CHARS}")
    # sqlglot (~8 MB) loads with the first query, not with the assistant. sql_check imports nothing of
    # ours: the dependency goes one way, and the refusal is raised here.
    from bicameral.store.sql_check import why_not_select

    if (reason := why_not_select(sql, DENIED_FUNCTIONS)) is not None:
        raise QueryRefused(reason)
    return sql


def run_readonly(
    db: SqlDatabase | Path, sql: str, *, max_rows: int = MAX_ROWS, max_text: int = MAX_TEXT,
    max_seconds: float = MAX_SECONDS, max_steps: int = MAX_STEPS, clock: Callable[[], float] = time.monotonic,
) -> QueryResult:
    """Validate and run the query read-only on the database (either engine; a path is a SQLite file); values are
    cut to `max_text` characters."""
    validate(sql)
    if not isinstance(db, Path) and db.engine == "postgresql":
        from bicameral.store.query_postgres import run_on_postgres  # psycopg loads only for PostgreSQL

        url: str = getattr(db, "url")  # noqa: B009  PostgresDatabase's, not part of the engine-neutral protocol
        return run_on_postgres(url, sql, max_rows=max_rows, max_text=max_text, max_seconds=max_seconds)
    db_path = db if isinstance(db, Path) else db.path
    conn = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = ON")
        for limit, value in _LIMITS.items():
            conn.setlimit(limit, value)
        conn.set_authorizer(_authorize)
        budget = _Budget(clock() + max_seconds, max_steps // _STEPS_PER_CHECK, clock)
        conn.set_progress_handler(budget.spent, _STEPS_PER_CHECK)
        try:
            cursor = conn.execute(sql)
            columns = [d[0] for d in cursor.description or ()]
            rows: list[tuple[object, ...]] = []
            # One row at a time, each value cut at once: never a hundred rows of full-size values in memory.
            while len(rows) <= max_rows and (row := cursor.fetchone()) is not None:
                rows.append(tuple(cell(v, max_text) for v in row))
        except sqlite3.DatabaseError as exc:
            if budget.stopped:
                raise QueryRefused(
                    f"the query took too long and was stopped: it ran longer than {max_seconds:g}s "
                    f"or past {max_steps:,} steps of work; narrow it (WHERE, LIMIT)"
                ) from None
            if exc.sqlite_errorcode == sqlite3.SQLITE_TOOBIG:
                raise QueryRefused(
                    f"the result was too large: a value read or built went past {MAX_VALUE_BYTES // 1_000_000} MB, "
                    "the limit for one string or blob"
                ) from None
            raise QueryRefused(f"the database refused it: {exc}") from None
        return QueryResult(columns, rows[:max_rows], more=len(rows) > max_rows)
    finally:
        conn.close()


class _Budget:
    """The progress handler: stops the query (a non-zero answer) once its time or its VM steps run out."""

    def __init__(self, deadline: float, checks: int, clock: Callable[[], float]) -> None:
        self._deadline = deadline
        self._checks = checks
        self._clock = clock
        self.stopped = False

    def spent(self) -> int:
        self._checks -= 1
        self.stopped = self._checks < 0 or self._clock() > self._deadline
        return int(self.stopped)


def _authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK
