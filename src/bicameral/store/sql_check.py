"""Whether a text of SQL is one read-only SELECT, by parsing it with sqlglot (CTEs and subqueries walked).

It says why not and leaves refusing to its caller, `query.py`, which owns the refusal and the list of denied
functions (its authorizer denies them too): this module imports nothing of ours, so `query.py` can load it
(and sqlglot) with the first query.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlglot
from sqlglot import exp

_DENIED_NODES = tuple(
    getattr(exp, name)
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "Command", "Pragma", "Attach",
        "Detach", "Transaction", "Commit", "Rollback", "Set", "Use", "Copy", "Into", "LoadData", "Analyze",
    )
    if hasattr(exp, name)
)
_QUERIES = (exp.Select, exp.Union, exp.Intersect, exp.Except)


def why_not_select(sql: str, denied_functions: Collection[str]) -> str | None:
    """Why `sql` is not exactly one SELECT with no write, PRAGMA or denied function; None when it is."""
    try:
        statements = [s for s in sqlglot.parse(sql, read="sqlite") if s is not None]
    except sqlglot.errors.ParseError as exc:
        return f"not valid SQL: {str(exc).splitlines()[0][:200]}"
    if len(statements) != 1:
        return f"exactly one statement is allowed; found {len(statements)}"
    statement = statements[0]
    if not isinstance(statement, _QUERIES):
        return f"only SELECT is allowed; this is {_kind(statement)}"
    for node in statement.walk():
        if isinstance(node, _DENIED_NODES):
            return f"{_kind(node)} is not allowed, even inside a CTE or subquery"
        if isinstance(node, exp.Func):
            name = _function_name(node)
            if name in denied_functions or name.startswith("pragma_"):
                return f"the function {name}() is not allowed"
    return None


def _kind(node: exp.Expr) -> str:
    # Statements sqlglot does not model (VACUUM, REPLACE, ...) come back as a Command named by their first word.
    return str(node.this).upper() if isinstance(node, exp.Command) else node.key.upper()


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()
