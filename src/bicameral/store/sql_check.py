"""Whether a text of SQL is one read-only SELECT, by parsing it with sqlglot (CTEs and subqueries walked)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from bicameral.store.query import DENIED_FUNCTIONS, QueryRefused

_DENIED_NODES = tuple(
    getattr(exp, name)
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "Command", "Pragma", "Attach",
        "Detach", "Transaction", "Commit", "Rollback", "Set", "Use", "Copy", "Into", "LoadData", "Analyze",
    )
    if hasattr(exp, name)
)
_QUERIES = (exp.Select, exp.Union, exp.Intersect, exp.Except)


def check_select(sql: str) -> None:
    """Raise QueryRefused unless `sql` parses as exactly one SELECT with no write, PRAGMA or denied function."""
    try:
        statements = [s for s in sqlglot.parse(sql, read="sqlite") if s is not None]
    except sqlglot.errors.ParseError as exc:
        raise QueryRefused(f"not valid SQL: {str(exc).splitlines()[0][:200]}") from None
    if len(statements) != 1:
        raise QueryRefused(f"exactly one statement is allowed; found {len(statements)}")
    statement = statements[0]
    if not isinstance(statement, _QUERIES):
        raise QueryRefused(f"only SELECT is allowed; this is {_kind(statement)}")
    for node in statement.walk():
        if isinstance(node, _DENIED_NODES):
            raise QueryRefused(f"{_kind(node)} is not allowed, even inside a CTE or subquery")
        if isinstance(node, exp.Func):
            name = _function_name(node)
            if name in DENIED_FUNCTIONS or name.startswith("pragma_"):
                raise QueryRefused(f"the function {name}() is not allowed")


def _kind(node: exp.Expr) -> str:
    # Statements sqlglot does not model (VACUUM, REPLACE, ...) come back as a Command named by their first word.
    return str(node.this).upper() if isinstance(node, exp.Command) else node.key.upper()


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()
