"""The owner's read-only SQL on PostgreSQL: the validated SELECT, said in PostgreSQL's dialect, on a short-lived
connection of its own in a READ ONLY transaction with a statement_timeout, read through a server-side cursor.

The fences: `query.validate` (one SELECT, no write anywhere in it) and the functions refused here, which are
PostgreSQL's ways to reach past the tables (sleeping, files, other sessions, settings, large objects, other
databases) or to build one huge value; then the server itself, which refuses any write in a READ ONLY transaction
and cancels the query at the timeout. Rows come one at a time, each value cut, as on SQLite.
"""

from __future__ import annotations

import psycopg
import sqlglot
from sqlglot import exp

from bicameral.redaction import without_password
from bicameral.store.query_types import QueryRefused, QueryResult, cell

CONNECT_TIMEOUT_SECONDS = 10
DENIED_FUNCTIONS = frozenset(
    "set_config current_setting nextval setval currval lastval txid_current repeat lpad rpad "
    "query_to_xml query_to_xml_and_xmlschema query_to_xmlschema table_to_xml cursor_to_xml database_to_xml "
    "schema_to_xml database_to_xml_and_xmlschema schema_to_xml_and_xmlschema".split()
)
DENIED_PREFIXES = ("pg_", "lo_", "dblink")


def why_not_on_postgres(sql: str) -> str | None:
    """Why a query that passed `validate` is still refused on PostgreSQL: a function of PostgreSQL's own."""
    for statement in sqlglot.parse(sql, read="sqlite"):
        for node in statement.walk() if statement is not None else ():
            if isinstance(node, exp.Func):
                name = str(node.name).lower() if isinstance(node, exp.Anonymous) else node.sql_name().lower()
                if name in DENIED_FUNCTIONS or name.startswith(DENIED_PREFIXES):
                    return f"the function {name}() is not allowed"
    return None


def run_on_postgres(
    url: str, sql: str, *, max_rows: int, max_text: int, max_seconds: float
) -> QueryResult:
    """Run an already validated SELECT read-only on the server at `url`; values cut to `max_text` characters."""
    if (reason := why_not_on_postgres(sql)) is not None:
        raise QueryRefused(reason)
    try:
        statement = sqlglot.transpile(sql, read="sqlite", write="postgres")[0]
    except sqlglot.errors.SqlglotError as exc:
        raise QueryRefused(f"not valid SQL: {str(exc).splitlines()[0][:200]}") from None
    try:
        conn = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_SECONDS, autocommit=False)
    except psycopg.Error:
        raise QueryRefused(f"the database at {without_password(url)} could not be reached") from None
    try:
        conn.read_only = True  # BEGIN READ ONLY: the server refuses every write, whatever the text says
        with conn.transaction(force_rollback=True):
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{max(int(max_seconds * 1000), 1)}ms",))
            # A server-side cursor: rows come as they are read, never the whole result at once.
            with conn.cursor(name="owner_query") as cursor:
                cursor.execute(statement)  # no parameters: a `%` in the text is only a `%`
                columns = [d.name for d in cursor.description or ()]
                rows: list[tuple[object, ...]] = []
                while len(rows) <= max_rows and (row := cursor.fetchone()) is not None:
                    rows.append(tuple(cell(v, max_text) for v in row))
        return QueryResult(columns, rows[:max_rows], more=len(rows) > max_rows)
    except psycopg.errors.QueryCanceled:
        raise QueryRefused(
            f"the query took too long and was stopped: it ran longer than {max_seconds:g}s; narrow it (WHERE, LIMIT)"
        ) from None
    except psycopg.Error as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0].replace(url, without_password(url))
        raise QueryRefused(f"the database refused it: {detail}") from None
    finally:
        conn.close()
