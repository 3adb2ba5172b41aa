"""The stores' SQL, written once for SQLite, said in PostgreSQL's dialect by sqlglot (each statement once, cached)."""

from __future__ import annotations

import functools
from typing import Any

import sqlglot
from sqlglot import exp


@functools.lru_cache(maxsize=2048)
def to_postgres(sql: str) -> str:
    """One SQLite statement as PostgreSQL runs it through psycopg (`%s` / `%(name)s` placeholders)."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    if isinstance(tree, exp.Insert):
        _qualify_upsert(tree)
    tree = tree.transform(_postgres_shape)
    return tree.sql(dialect="postgres", identify=True)


def migration_to_postgres(statements: list[str]) -> list[str]:
    """A migration's statements for PostgreSQL; FTS5 tables and their triggers are the memory index's own concern."""
    return [to_postgres(statement) for statement in statements if not _sqlite_only(statement)]


def _sqlite_only(statement: str) -> bool:
    head = " ".join(statement.split()[:4]).upper()
    return head.startswith("CREATE VIRTUAL TABLE") or head.startswith("PRAGMA")


def _postgres_shape(node: exp.Expression) -> exp.Expression:
    """The differences sqlglot leaves to us: 64-bit integers, rowid keys, key columns without an order."""
    if isinstance(node, exp.DataType) and node.this in (exp.DataType.Type.INT, exp.DataType.Type.BIGINT):
        # SQLite's INTEGER holds 64 bits (epoch milliseconds, Telegram ids); PostgreSQL's INT only 32.
        return exp.DataType.build("BIGINT")
    if isinstance(node, exp.ColumnDef) and _is_rowid_key(node):
        # `INTEGER PRIMARY KEY` is SQLite's rowid: numbered by the database when not given.
        constraints: list[Any] = list(node.args.get("constraints") or [])
        constraints.insert(0, exp.ColumnConstraint(kind=exp.GeneratedAsIdentityColumnConstraint(this=False)))
        node.set("constraints", constraints)
        return node
    if isinstance(node, exp.Ordered) and not isinstance(node.parent, exp.Order | exp.Window):
        # An index's or a conflict target's columns: an order there would be read as NULLS FIRST, which
        # PostgreSQL refuses in ON CONFLICT and does not need in an index.
        inner: exp.Expression = node.this
        return inner
    if isinstance(node, exp.Literal) and node.is_string:
        # psycopg reads `%` as a placeholder's start in every statement it is given parameters for.
        return exp.Literal.string(node.this.replace("%", "%%"))
    return node


def _qualify_upsert(insert: exp.Insert) -> None:
    """`DO UPDATE SET n = n + 1`: SQLite reads the bare `n` as the row's, PostgreSQL calls it ambiguous with excluded's."""
    conflict = insert.args.get("conflict")
    table = insert.this.this if isinstance(insert.this, exp.Schema) else insert.this
    if not isinstance(conflict, exp.OnConflict) or not isinstance(table, exp.Table):
        return
    name = table.alias_or_name
    values = [assignment.expression for assignment in conflict.expressions if isinstance(assignment, exp.EQ)]
    where = conflict.args.get("where")
    for part in [*values, *([where] if where is not None else [])]:
        for column in part.find_all(exp.Column):
            if not column.table:
                column.set("table", exp.to_identifier(name))


def _is_rowid_key(column: exp.ColumnDef) -> bool:
    kind = column.args.get("kind")
    if not isinstance(kind, exp.DataType) or kind.this is not exp.DataType.Type.INT:
        return False
    return any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint) for c in column.args.get("constraints") or [])
