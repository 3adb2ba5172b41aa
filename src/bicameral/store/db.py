"""The SQLite database: one WAL-mode connection, migrations applied in order, checkpoints beside it."""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from bicameral.store.reserve import DiskReserve
from bicameral.store.sql import Params, SchemaTooNew, tx_statements

log = logging.getLogger(__name__)

# Commits between checkpoints. A commit writes a few pages, so the WAL stays within a few MB, about
# what SQLite's own 1000-page threshold allows.
CHECKPOINT_EVERY = 250


class Database:
    """SQLite: a single connection guarded by a lock; statements are short, so the loop never stalls."""

    engine = "sqlite"

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if self.on_disk:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._depth = 0  # open transactions of the thread holding the lock: 1 is the real one, more are savepoints
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._commits = 0  # since the last checkpoint was asked for
        self._checkpointer: _Checkpointer | None = None
        # Space kept for us on a disk others may fill: checked before each write, given up when SQLite finds it full.
        self.reserve: DiskReserve | None = None
        if self.on_disk:
            # A checkpoint copies the WAL into the database file and syncs it: a stall of milliseconds, far
            # more on an SD card. The thread of `_Checkpointer` does that, never the caller of a commit.
            self._conn.execute("PRAGMA wal_autocheckpoint=0")
        self.migrate()

    @property
    def on_disk(self) -> bool:
        return str(self.path) != ":memory:"

    def migrate(self) -> int:
        """Apply every migration newer than the schema's user_version; returns the version."""
        with self._lock:
            current: int = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if current > known_version():
                raise SchemaTooNew(current, known_version())
            # The usual start: the schema is current, so no migration file is even read.
            for version, statements in migration_statements(after=current):
                with self.tx() as conn:
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={version}")
                current = version
            return current

    @contextmanager
    def tx(self, *, serial: str | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed on success, rolled back on any error.

        `serial` asks nothing more of SQLite: BEGIN IMMEDIATE already runs one writer at a time.

        Inside another transaction of the same thread it is a savepoint: its error undoes only its own
        writes, and what it wrote commits with the outer transaction. Never hold one across an await:
        another coroutine's writes would join it.
        """
        with self._lock:
            self._depth += 1
            nested = self._depth > 1
            begin, undo, end = tx_statements(self._depth, "BEGIN IMMEDIATE")
            try:
                if not nested and self.reserve is not None:
                    self.reserve.check()
                self._conn.execute(begin)
                try:
                    yield self._conn
                except BaseException:
                    # A full disk can make SQLite roll the whole transaction back itself: nothing is left to undo.
                    if nested or self._conn.in_transaction:
                        self._conn.execute(undo)
                    if nested:
                        self._conn.execute(end)  # rolled back to it, the savepoint itself still has to go
                    raise
                self._conn.execute(end)
                if not nested:
                    self._committed()
            except sqlite3.OperationalError as exc:
                self._full(exc)
                raise
            finally:
                self._depth -= 1

    def query(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._conn.execute(sql, params).fetchone()
            return row

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        with self._lock:
            if not self._depth and self.reserve is not None:
                self.reserve.check()
            try:
                cursor = self._conn.execute(sql, params)
            except sqlite3.OperationalError as exc:
                self._full(exc)
                raise
            if not self._depth:
                self._committed()  # a statement outside a transaction commits on its own
            return cursor

    def close(self) -> None:
        with self._lock:
            if self._checkpointer is not None:
                self._checkpointer.stop()
            self._conn.close()  # the last connection to close checkpoints what is left

    def _full(self, exc: sqlite3.OperationalError) -> None:
        """SQLITE_FULL: this write is lost, but with the reserve given back the next one has room."""
        # Only errors sqlite3 raised carry a code; one raised by hand (a wrapper, a test) has none.
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL and self.reserve is not None:
            self.reserve.disk_full()

    def _committed(self) -> None:
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY or not self.on_disk:  # an in-memory database has no WAL
            return
        self._commits = 0
        if self._checkpointer is None:
            self._checkpointer = _Checkpointer(self.path)
        self._checkpointer.request()


class _Checkpointer:
    """A thread with a connection of its own that checkpoints the WAL when asked (started at the first ask)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wanted = threading.Event()
        self._stopping = False
        self.done = 0  # checkpoints run so far
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wanted.set()

    def stop(self) -> None:
        self._stopping = True
        self._wanted.set()
        self._thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(str(self._path), check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=5000")
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._stopping:
                    return
                try:
                    # PASSIVE: copies what no reader still needs, never waits for writers or makes them wait.
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    log.warning("database checkpoint failed (tried again after more writes): %s", exc)
                self.done += 1
        finally:
            conn.close()


def _migration_files() -> list[tuple[int, Traversable]]:
    """The NNN_*.sql files in version order."""
    folder = resources.files("bicameral.store").joinpath("migrations")
    found = [(int(e.name[:3]), e) for e in folder.iterdir() if e.name.endswith(".sql") and e.name[:3].isdigit()]
    return sorted(found, key=lambda pair: pair[0])


@functools.cache
def known_version() -> int:
    """The newest schema version this code knows."""
    return max(version for version, _ in _migration_files())


def migration_statements(after: int) -> Iterator[tuple[int, list[str]]]:
    """Each migration newer than `after`, as its statements (run one by one: executescript would commit)."""
    for version, entry in _migration_files():
        if version > after:
            yield version, list(_statements(entry.read_text(encoding="utf-8")))


def _statements(sql: str) -> Iterator[str]:
    buffer = ""
    for line in sql.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()
