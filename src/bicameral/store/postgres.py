"""PostgreSQL for the stores: one psycopg connection guarded by a lock, the SQLite dialect translated per statement."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.numeric import Int8Dumper

from bicameral.errors import ConfigError
from bicameral.redaction import without_password
from bicameral.store.db import known_version, migration_statements
from bicameral.store.dialect import migration_to_postgres, to_postgres
from bicameral.store.reserve import DiskReserve
from bicameral.store.sql import (
    DatabaseError,
    Error,
    IntegrityError,
    OperationalError,
    Params,
    SchemaTooNew,
    tx_statements,
)

log = logging.getLogger(__name__)

# Taken inside the migrating transaction: two workers starting at once migrate one after the other.
_MIGRATION_LOCK = 0x62696361  # "bica"
CONNECT_TIMEOUT_SECONDS = 10


class DatabaseUnreachable(ConfigError):
    """The database URL, the server or the credentials are wrong; the message never carries the password."""


class PostgresDatabase:
    """The same surface as `store.db.Database`, on a PostgreSQL server shared by any number of workers."""

    engine = "postgresql"
    on_disk = False  # no WAL of ours to checkpoint, no disk reserve to keep

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = Path(without_password(url))  # shown, never opened
        self.reserve: DiskReserve | None = None
        self._lock = threading.RLock()
        self._depth = 0
        self._conn = _connect(url)
        self.migrate()

    def migrate(self) -> int:
        """Apply every migration newer than `schema_version`, under an advisory lock; returns the version."""
        with self._lock, self.tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)" % _MIGRATION_LOCK)  # noqa: UP031  a constant
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = int(row[0] or 0) if row is not None else 0
            if current > known_version():
                raise SchemaTooNew(current, known_version())
            for version, statements in migration_statements(after=current):
                for statement in migration_to_postgres(statements):
                    self._raw(statement)
                conn.execute("DELETE FROM schema_version")
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
                current = version
            return current

    @contextmanager
    def tx(self, *, serial: str | None = None) -> Iterator[_Connection]:
        """A transaction, committed on success; inside another of the same thread, a savepoint.

        Under READ COMMITTED two workers may both read a count, then both write past it: a `serial` key makes
        transactions with that key wait for each other (a transaction-scoped advisory lock).
        """
        with self._lock:
            self._depth += 1
            nested = self._depth > 1
            begin, undo, end = tx_statements(self._depth, "BEGIN")
            try:
                self._raw(begin, fresh=not nested)
                if serial is not None:
                    self._raw("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (serial,))
                try:
                    yield _Connection(self)
                except BaseException:
                    if not self._conn.closed:
                        self._raw(undo)
                    raise
                self._raw(end)
            finally:
                self._depth -= 1

    def query(self, sql: str, params: Params = ()) -> Sequence[_Row]:
        with self._lock:
            rows: list[_Row] = self._raw(to_postgres(sql), params, fresh=not self._depth).fetchall()
            return rows

    def query_one(self, sql: str, params: Params = ()) -> _Row | None:
        with self._lock:
            row: _Row | None = self._raw(to_postgres(sql), params, fresh=not self._depth).fetchone()
            return row

    def execute(self, sql: str, params: Params = ()) -> psycopg.Cursor[Any]:
        # A write of its own runs in a transaction of its own: if the connection turns out dead at its BEGIN, the
        # write was never sent and goes on a new connection; a write lost mid-flight is never sent twice.
        with self._lock, self.tx() as conn:
            return conn.execute(sql, params)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _run(self, sql: str, params: Params) -> psycopg.Cursor[Any]:
        return self._raw(to_postgres(sql), params)

    def _run_many(self, sql: str, rows: Iterable[Params]) -> psycopg.Cursor[Any]:
        cursor = self._conn.cursor()
        try:
            cursor.executemany(to_postgres(sql), rows)
        except psycopg.Error as exc:
            raise _as_dbapi(exc) from exc
        return cursor

    def _raw(self, sql: str, params: Params | None = None, *, fresh: bool = False) -> psycopg.Cursor[Any]:
        """Run one statement. `fresh`: nothing of a transaction has run yet (its BEGIN, or a read of its own), so a
        connection the server dropped meanwhile (a restart, a failover, an idle timeout) is replaced and the
        statement sent again, once; mid-transaction a lost connection is the transaction's error."""
        if self._conn.closed and fresh:
            self._reconnect()
        try:
            return self._conn.execute(sql, params)
        except psycopg.OperationalError as exc:
            if not (fresh and self._conn.closed):
                raise _as_dbapi(exc) from exc
            log.warning("the database connection was lost (%s): connecting again", _first_line(exc))
        except psycopg.Error as exc:
            raise _as_dbapi(exc) from exc
        self._reconnect()
        try:
            return self._conn.execute(sql, params)
        except psycopg.Error as exc:
            raise _as_dbapi(exc) from exc

    def _reconnect(self) -> None:
        try:
            self._conn = _connect(self.url)
        except DatabaseUnreachable as exc:
            raise OperationalError(str(exc)) from None  # a store call fails as on any lost connection


class _Connection:
    """A transaction's connection as the stores use it."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    def execute(self, sql: str, params: Params = (), /) -> psycopg.Cursor[Any]:
        return self._db._run(sql, params)

    def executemany(self, sql: str, rows: Iterable[Params], /) -> psycopg.Cursor[Any]:
        return self._db._run_many(sql, rows)


class _Row(tuple[Any, ...]):
    """A row read by position or by column name, as sqlite3.Row is."""

    names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                key = self.names.index(key)
            except ValueError:
                raise IndexError(f"no such column: {key}") from None
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        return list(self.names)


def _rows(cursor: psycopg.Cursor[Any]) -> Any:
    names = tuple(column.name for column in cursor.description or ())
    row_type = type("Row", (_Row,), {"names": names})
    return lambda values: row_type(values)


class _BoolAsInteger(Int8Dumper):
    """SQLite stores booleans as 0 and 1, and the schema says INTEGER: so do we."""

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def schema_version(url: str) -> int:
    """The server's schema version (0 before the first start), read without migrating; DatabaseUnreachable when it
    cannot be reached or logged in to."""
    with _connect(url) as conn:
        made = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone() if made and made[0] else None
    return int(row[0] or 0) if row is not None else 0


def _connect(url: str) -> psycopg.Connection[Any]:
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS, row_factory=_rows)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnreachable(
            f"could not connect to the database at {without_password(url)}: {reason.replace(url, '***')} "
            "(check BICAMERAL_DATABASE_URL: host, port, user, password and database name)"
        ) from None
    conn.adapters.register_dumper(bool, _BoolAsInteger)
    return conn


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _as_dbapi(exc: psycopg.Error) -> Error:
    """The same family of errors the SQLite engine raises, so callers catch one."""
    kind: type[Error]
    if isinstance(exc, psycopg.IntegrityError):
        kind = IntegrityError
    elif isinstance(exc, psycopg.OperationalError):
        kind = OperationalError
    else:
        kind = DatabaseError
    return kind(str(exc).strip() or type(exc).__name__)
