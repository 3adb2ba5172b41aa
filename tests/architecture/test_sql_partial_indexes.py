"""No statement binds a parameter where a partial index's condition is tested.

SQLite decides whether a partial index applies by looking at the bound value, so a statement like
`WHERE state = ?` on the outbox is planned again at every call (5 µs becomes 25 µs, on the hottest
queries of a message). The states these indexes test are constants: spell them as literals.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import bicameral
from bicameral.store.db import Database

SOURCE = Path(bicameral.__file__).parent
_TESTED = re.compile(r"\b(\w+)\s*(?:=|IN\b)", re.IGNORECASE)


def _partial_index_columns() -> set[tuple[str, str]]:
    """(table, column) for every column a partial index's WHERE compares with a value."""
    db = Database(":memory:")
    try:
        rows = db.query("SELECT tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql LIKE '%WHERE%'")
    finally:
        db.close()
    found = set()
    for row in rows:
        condition = row["sql"].split(" WHERE ", 1)[1]
        found |= {(row["tbl_name"], column) for column in _TESTED.findall(condition)}
    return found


def _sql_texts(path: Path) -> set[tuple[int, str]]:
    """Every string literal in a module (an f-string's literal parts joined), with its line."""
    texts = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            texts.add((node.lineno, "".join(str(p) for p in parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.add((node.lineno, node.value))
    return texts


def test_the_schema_has_partial_indexes_on_the_states_the_hot_queries_test() -> None:
    columns = _partial_index_columns()
    assert {("outbox", "state"), ("messages", "status")} <= columns


def test_no_statement_binds_a_value_a_partial_index_tests() -> None:
    offending: set[str] = set()
    for table, column in sorted(_partial_index_columns()):
        bound = re.compile(rf"\b{column}\s*(?:=|!=|<>|IN\s*\()\s*\?", re.IGNORECASE)
        mentions = re.compile(rf"\b(?:FROM|UPDATE|INTO|JOIN)\s+{table}\b", re.IGNORECASE)
        for path in SOURCE.rglob("*.py"):
            for line, text in _sql_texts(path):
                condition = re.split(r"\bWHERE\b", text, maxsplit=1, flags=re.IGNORECASE)[1:]  # not a SET
                if mentions.search(text) and condition and bound.search(condition[0]):
                    offending.add(f"{path.relative_to(SOURCE)}:{line} binds {table}.{column}")
    assert not offending, "spell the value as a literal:\n" + "\n".join(sorted(offending))
