"""A real PostgreSQL for the tests: Debian's package (installed when missing), one server in a temp dir, on loopback."""

# `python -m tests.support.postgres` installs the package: `scripts/test` runs it before pytest, so a fresh CI machine
# has the binaries before the first test asks for a server. `initdb` and `postgres` refuse to run as root: as root,
# the server's folder belongs to the `postgres` user (the package makes it) and both run as that user. The superuser
# logs in with a password (scram-sha-256 on TCP), so a wrong password is refused by the server itself; fsync and
# friends are off, as nothing a test writes must outlive a crash.

from __future__ import annotations

import atexit
import itertools
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

USER = "bicameral"
START_SECONDS = 60  # pg_ctl -w: a loaded 2-core machine may take many times the usual 0.1 s
_APT_SECONDS = 900
_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=200")
_names = itertools.count(1)


class PostgresUnavailable(RuntimeError):
    """PostgreSQL could not be installed or started; the message says why."""


def _bindir() -> Path | None:
    """Where initdb and pg_ctl are: the newest of Debian's versioned folders, else PATH (/usr/local/bin links)."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))
    for folder in reversed(versions):
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    return None


def ensure_postgres() -> Path:
    """The folder of PostgreSQL's server programs, `apt-get install postgresql` first only when they are missing."""
    if (folder := _bindir()) is not None:
        return folder
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise PostgresUnavailable("initdb and pg_ctl are missing: install Debian's `postgresql` package (as root)")
    # No cluster of the package's own (it would listen on 5432 beside ours): the tests make theirs.
    conf = Path("/etc/postgresql-common/createcluster.d")
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "bicameral-tests.conf").write_text("create_main_cluster = false\n", encoding="utf-8")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "postgresql"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=_APT_SECONDS, env=env)
        if done.returncode != 0:
            raise PostgresUnavailable(f"`{' '.join(command)}` failed:\n{done.stderr[-2000:]}")
    if (folder := _bindir()) is None:
        raise PostgresUnavailable("`apt-get install postgresql` ran, but initdb and pg_ctl are still not found")
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user() -> dict[str, Any]:
    """subprocess arguments that run a program as `postgres` when we are root (initdb and postgres refuse root)."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}


class PostgresServer:
    """One PostgreSQL server with its own temp folder: `start` returns once it accepts connections, `stop` removes it."""

    def __init__(self) -> None:
        self.password = secrets.token_urlsafe(16)
        self.user = USER
        self.host = "127.0.0.1"
        self.port = 0
        self.folder: Path | None = None
        self._bin: Path | None = None

    @property
    def data_dir(self) -> Path:
        assert self.folder is not None, "start the server first"
        return self.folder / "data"

    @property
    def log_path(self) -> Path:
        assert self.folder is not None, "start the server first"
        return self.folder / "server.log"

    def start(self) -> PostgresServer:
        self._bin = ensure_postgres()
        self.folder = Path(tempfile.mkdtemp(prefix="bicameral-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        atexit.register(self.stop)  # a session that dies still stops the postmaster (it daemonizes)
        try:
            self._initdb()
            self._start_on_a_free_port()
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, *argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
        assert self._bin is not None and self.folder is not None
        return subprocess.run(
            [str(self._bin / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout, cwd=self.folder,
            **_as_server_user(),
        )

    def _initdb(self) -> None:
        assert self.folder is not None
        pwfile = self.folder / "pwfile"
        pwfile.write_text(self.password + "\n", encoding="utf-8")
        if os.geteuid() == 0:
            shutil.chown(pwfile, "postgres", "postgres")
        pwfile.chmod(0o600)
        done = self._run(
            "initdb", "-D", str(self.data_dir), "-U", self.user, f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
            "--auth-local=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions", timeout=120,
        )
        pwfile.unlink()
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed:\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")

    def _start_on_a_free_port(self) -> None:
        """pg_ctl start -w; a port taken between choosing and binding it is retried with another."""
        assert self.folder is not None
        for _ in range(5):
            self.port = free_port()
            options = [f"-p {self.port}", f"-c listen_addresses={self.host}", f"-c unix_socket_directories={self.folder}"]
            options += [f"-c {setting}" for setting in _SETTINGS]
            done = self._run(
                "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_path), "-w", "-t", str(START_SECONDS),
                "-o", " ".join(options), "start", timeout=START_SECONDS + 30,
            )
            if done.returncode == 0:
                return
            log = self._log_tail()
            if "could not bind" not in log and "Address already in use" not in log:
                break
        raise PostgresUnavailable(f"pg_ctl start failed:\n{done.stderr[-1500:]}\n{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        """`postgresql://user:password@127.0.0.1:port/database` (another password for the tests of a wrong one)."""
        return f"postgresql://{self.user}:{self.password if password is None else password}@{self.host}:{self.port}/{database}"

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.url(), autocommit=True, connect_timeout=30)

    def create_database(self, name: str) -> str:
        """A new empty database called `name`; its URL."""
        from psycopg import sql

        with self._admin() as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop `name`, ending any connection a test left open to it."""
        from psycopg import sql

        with self._admin() as connection:
            connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def fresh_name(self) -> str:
        return f"test_{next(_names)}_{secrets.token_hex(4)}"

    def fresh_url(self) -> str:
        """The URL of a new, empty database of its own."""
        return self.create_database(self.fresh_name())

    def stop(self) -> None:
        """Stop the server (fast: open connections are ended) and remove its folder; twice is harmless."""
        if self.folder is None:
            return
        atexit.unregister(self.stop)
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", str(START_SECONDS), "stop",
                          timeout=START_SECONDS + 30)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

if __name__ == "__main__":
    try:
        print(ensure_postgres())
    except PostgresUnavailable as exc:
        print(f"PostgreSQL: {exc}", file=sys.stderr)
        sys.exit(1)
