"""The database of a backup when it is PostgreSQL: `pg_dump` in its custom format, loaded back by `pg_restore`.

Debian's client tools are used (found on PATH, else the newest under /usr/lib/postgresql); the password goes to
them in PGPASSWORD, never on a command line another user could read, and never into a message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from bicameral.backup.manifest import BackupError
from bicameral.redaction import without_password

DUMP_NAME = "postgresql.dump"
CONNECT_TIMEOUT_SECONDS = 10


def client_tool(name: str) -> str:
    """The path of pg_dump or pg_restore, or a BackupError saying what to install."""
    found = shutil.which(name)
    if found is None:
        candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: _major(p.parent.parent.name))
        found = str(candidates[-1]) if candidates else None
    if found is None:
        raise BackupError(
            f"{name} was not found: the database is PostgreSQL and its backup is made with PostgreSQL's client tools; "
            "install them (Debian: apt-get install postgresql-client, the server's major version or newer)"
        )
    return found


def dump_database(url: str, target: Path) -> None:
    """The whole database at `url` into `target`, pg_dump's custom format (one consistent snapshot)."""
    _run(
        [client_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--file={target}", "--dbname",
         _dbname(url)],
        url, "dumping the database",
    )


def load_dump(url: str, dump: Path) -> None:
    """Load a dump into the database at `url`, which must hold no tables yet; all of it or nothing."""
    check_empty(url)
    _run(
        [client_tool("pg_restore"), "--no-owner", "--no-privileges", "--single-transaction", "--exit-on-error",
         "--dbname", _dbname(url), str(dump)],
        url, "loading the database",
    )


def check_empty(url: str) -> None:
    """A BackupError unless the database at `url` holds no tables (asked before a restore moves anything)."""
    if (tables := _tables(url)) > 0:
        raise BackupError(
            f"the database at {without_password(url)} already holds {tables} tables: a backup's database is loaded only into an "
            "empty one (create a new database and point BICAMERAL_DATABASE_URL at it)"
        )


def _tables(url: str) -> int:
    import psycopg  # only a PostgreSQL install gets here

    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            ).fetchone()
    except psycopg.Error as exc:
        raise BackupError(f"the database at {without_password(url)} could not be reached ({type(exc).__name__})") from None
    return int(row[0]) if row else 0


def _run(argv: list[str], url: str, doing: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PGCONNECT_TIMEOUT": str(CONNECT_TIMEOUT_SECONDS),
    }
    password = urlsplit(url).password
    if password is not None:
        env["PGPASSWORD"] = unquote(password)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().replace(url, without_password(url))
        if password:
            said = said.replace(password, "***").replace(unquote(password), "***")
        raise BackupError(f"{doing} failed ({Path(argv[0]).name} exited with {done.returncode}): {said[-1500:]}")


def _dbname(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=_without_password(parts.netloc)))


def _without_password(netloc: str) -> str:
    if "@" not in netloc:
        return netloc
    user, host = netloc.rsplit("@", 1)
    return f"{user.split(':', 1)[0]}@{host}"


def _major(name: str) -> int:
    return int(name) if name.isdigit() else 0
