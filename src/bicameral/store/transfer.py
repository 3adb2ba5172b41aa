"""A SQLite database's rows moved into an empty PostgreSQL one of the same schema, in one transaction."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from graphlib import TopologicalSorter

from bicameral.errors import BicameralError
from bicameral.store.db import Database, known_version
from bicameral.store.sql import Connection, Error, SqlDatabase

# The memory index: rebuilt from the memory files at its first sync, since an empty `memory_files` lists none.
INDEX_TABLES = frozenset({"memory_files", "memory_facts"})
BATCH_ROWS = 1000


class TransferRefused(BicameralError):
    """The copy was not made (or was undone): the message says why and what to do."""


@dataclass(frozen=True)
class Transferred:
    """What was copied: rows per table, and how long it took."""

    rows: dict[str, int]
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def transfer(
    source: Database, target: SqlDatabase, *, batch: int = BATCH_ROWS, timer: Callable[[], float] = time.perf_counter
) -> Transferred:
    """Every app table of `source` into `target` (both at this code's schema); all or nothing."""
    started = timer()
    _same_schema(source, target)
    tables = app_tables(source)
    columns = _target_columns(target)
    missing = [t for t in tables if t not in columns]
    if missing:
        raise TransferRefused(f"the target database has no table {', '.join(missing)}: is it a bicameral database?")
    copied: dict[str, int] = {}
    with target.tx() as conn:
        for table in tables:
            if conn.execute(f"SELECT 1 FROM {_q(table)} LIMIT 1").fetchone() is not None:
                raise TransferRefused(
                    f"the target database already holds bicameral data (table {table} has rows): "
                    "migrate only into an empty database"
                )
        for table in tables:
            names = [n for n in _source_columns(source, table) if n in columns[table]]
            try:
                copied[table] = _copy(source, conn, table, names, batch)
            except Error as exc:
                raise TransferRefused(f"copying table {table} failed, nothing was kept: {exc}") from None
        _reset_identities(conn, tables)
        _check_counts(source, conn, copied)
    return Transferred(copied, timer() - started)


def app_tables(source: Database) -> list[str]:
    """The tables to copy, each after the tables it refers to: no SQLite internals, no full-text or memory index."""
    rows = source.query("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
    virtual = [r["name"] for r in rows if str(r["sql"] or "").upper().startswith("CREATE VIRTUAL TABLE")]
    names = [
        str(r["name"])
        for r in rows
        if not str(r["name"]).startswith("sqlite_")
        and r["name"] not in INDEX_TABLES
        and r["name"] not in virtual
        and not any(str(r["name"]).startswith(v + "_") for v in virtual)  # an FTS5 table's shadow tables
    ]
    order: TopologicalSorter[str] = TopologicalSorter()
    for name in names:
        refers = {str(r["table"]) for r in source.query(f"PRAGMA foreign_key_list({_q(name)})")}
        order.add(name, *(refers & set(names)))
    return list(order.static_order())


def _same_schema(source: Database, target: SqlDatabase) -> None:
    row = source.query_one("PRAGMA user_version")
    found = int(row[0]) if row is not None else 0
    if found != known_version():
        raise TransferRefused(
            f"the SQLite database's schema is version {found}, not {known_version()}: start this bicameral on it "
            "once (it migrates it), then migrate"
        )
    if target.migrate() != known_version():
        raise TransferRefused("the target database's schema is not this bicameral's")


def _target_columns(target: SqlDatabase) -> dict[str, set[str]]:
    rows = target.query(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
    )
    found: dict[str, set[str]] = {}
    for table, column in ((str(r[0]), str(r[1])) for r in rows):
        found.setdefault(table, set()).add(column)
    return found


def _source_columns(source: Database, table: str) -> list[str]:
    return [str(r["name"]) for r in source.query(f"PRAGMA table_info({_q(table)})")]


def _copy(source: Database, conn: Connection, table: str, names: list[str], batch: int) -> int:
    listed = ", ".join(_q(n) for n in names)
    insert = f"INSERT INTO {_q(table)} ({listed}) VALUES ({', '.join('?' for _ in names)})"
    cursor = source.execute(f"SELECT {listed} FROM {_q(table)}")
    count = 0
    while rows := cursor.fetchmany(batch):
        conn.executemany(insert, [tuple(row) for row in rows])
        count += len(rows)
    return count


def _reset_identities(conn: Connection, tables: list[str]) -> None:
    """Each identity column's next value after the largest id copied, so new rows never collide with old ones."""
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall()
    for table, column in ((str(r[0]), str(r[1])) for r in rows):
        if table in tables:
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence(?, ?), COALESCE(MAX({_q(column)}), 0) + 1, false) FROM {_q(table)}",
                (_q(table), column),
            )


def _check_counts(source: Database, conn: Connection, copied: dict[str, int]) -> None:
    for table, count in copied.items():
        there = conn.execute(f"SELECT COUNT(*) FROM {_q(table)}").fetchone()
        here = source.query_one(f"SELECT COUNT(*) FROM {_q(table)}")
        counts = (count, int(there[0]) if there else -1, int(here[0]) if here else -1)
        if len(set(counts)) != 1:
            raise TransferRefused(f"table {table}: {counts[1]} rows arrived of {counts[2]}; nothing was kept")


def _q(name: str) -> str:
    """A quoted identifier (our own table and column names, some of them SQL words such as `user`)."""
    return '"' + name.replace('"', '""') + '"'
