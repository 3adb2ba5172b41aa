"""Which worker serves a PostgreSQL database: a session advisory lock held on a connection of its own."""

# PostgreSQL releases a session advisory lock when the session ends, so a worker killed with -9 lets go of it as
# soon as the server sees its connection close; a standby trying every second then takes it. The lock's connection
# asks the server for TCP keepalives, so a worker whose machine or network vanished lets go within seconds too. A
# paused worker (SIGSTOP) still answers them from its kernel: it holds the lock until it resumes or is killed.

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from bicameral.redaction import without_password

if TYPE_CHECKING:
    import psycopg

# One serving worker per database, whatever the bot: the stores of one database are one assistant's.
SERVING_LOCK = 0x7365727665  # "serve"
APPLICATION_NAME = "bicameral serving lock"
CONNECT_TIMEOUT_SECONDS = 10
# The server drops a silent client after about 5 + 2 × 3 = 11 s (the worker's own check gives up sooner).
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}
_SERVER_KEEPALIVES = ("SET tcp_keepalives_idle = 5", "SET tcp_keepalives_interval = 2", "SET tcp_keepalives_count = 3")


class ServingLock:
    """`try_take` the database's serving lock (blocking calls: run them in a thread); `alive` checks it is still held."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: psycopg.Connection[Any] | None = None
        self._held = False
        self._guard = threading.Lock()

    @property
    def held(self) -> bool:
        return self._held

    def connect(self) -> None:
        """Open the lock's connection; a wrong URL, server or password is `DatabaseUnreachable`, the password unshown."""
        import psycopg
        from psycopg.conninfo import make_conninfo

        from bicameral.store.postgres import DatabaseUnreachable

        with self._guard:
            if self._conn is not None and not self._conn.closed:
                return
            try:  # a URL libpq cannot read fails here too, as a psycopg error
                conninfo = make_conninfo(self._url, application_name=APPLICATION_NAME, **_KEEPALIVES)
                conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)
                for statement in _SERVER_KEEPALIVES:
                    conn.execute(statement)
            except psycopg.Error as exc:
                text = str(exc).strip()
                reason = text.splitlines()[-1] if text else type(exc).__name__
                raise DatabaseUnreachable(
                    f"could not connect to the database at {without_password(self._url)}: "
                    f"{reason.replace(self._url, '***')} "
                    "(check BICAMERAL_DATABASE_URL: host, port, user, password and database name)"
                ) from None
            self._conn = conn

    def try_take(self) -> bool:
        """Take the lock if no other worker holds it; True when this worker now serves. Connects (again) as needed."""
        self.connect()
        with self._guard:
            assert self._conn is not None
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (SERVING_LOCK,)).fetchone()
            self._held = bool(row is not None and row[0])
            return self._held

    def alive(self) -> bool:
        """Whether the connection that holds the lock still answers (the lock lives exactly as long as it)."""
        import psycopg

        with self._guard:
            if self._conn is None or self._conn.closed or not self._held:
                return False
            try:
                self._conn.execute("SELECT 1")
            except psycopg.Error:
                return False
            return True

    def close(self) -> None:
        """Let the lock go (its session ends) and close the connection."""
        with self._guard:
            self._held = False
            if self._conn is not None:
                self._conn.close()
                self._conn = None
