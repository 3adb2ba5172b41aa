"""What the stores see of a database, whichever engine holds it: a connection, a cursor, a row, DB-API errors."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bicameral.store.reserve import DiskReserve

# Positional or named statement parameters.
Params = tuple[Any, ...] | dict[str, Any]

# The DB-API error classes both engines raise (PostgreSQL's are turned into these), so callers catch one family.
Error = sqlite3.Error
DatabaseError = sqlite3.DatabaseError
DataError = sqlite3.DataError
IntegrityError = sqlite3.IntegrityError
InterfaceError = sqlite3.InterfaceError
OperationalError = sqlite3.OperationalError


class Row(Protocol):
    """A result row: by position or by column name."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What a transaction hands its body: statements in SQLite's dialect, `?` or `:name` placeholders."""

    def execute(self, sql: str, params: Params = ..., /) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Params], /) -> Cursor: ...


class SqlDatabase(Protocol):
    """One database the stores share: SQLite in the data dir (`store.db`) or PostgreSQL (`store.postgres`)."""

    path: Path
    reserve: DiskReserve | None

    @property
    def on_disk(self) -> bool: ...

    @property
    def engine(self) -> str: ...

    def migrate(self) -> int: ...

    def tx(self, *, serial: str | None = None) -> AbstractContextManager[Connection]:
        """A write transaction; those given the same `serial` key run one at a time, across processes too."""
        ...

    def query(self, sql: str, params: Params = ()) -> Sequence[Row]: ...

    def query_one(self, sql: str, params: Params = ()) -> Row | None: ...

    def execute(self, sql: str, params: Params = ()) -> Cursor: ...

    def close(self) -> None: ...


def tx_statements(depth: int, begin: str) -> tuple[str, str, str]:
    """How a transaction at `depth` begins, is undone and ends: the real one at 1 (`begin` is the engine's own),
    a savepoint inside it deeper down."""
    if depth > 1:
        return f"SAVEPOINT s{depth}", f"ROLLBACK TO SAVEPOINT s{depth}", f"RELEASE SAVEPOINT s{depth}"
    return begin, "ROLLBACK", "COMMIT"


class SchemaTooNew(sqlite3.DatabaseError):
    """The database was migrated by a newer bicameral than this one: this one must not write to it."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the database's schema is version {found}, newer than this bicameral knows ({known}): "
            "another worker was upgraded; upgrade this one too"
        )
