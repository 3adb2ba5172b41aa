"""`bicameral migrate-db --to URL`: the data dir's SQLite database moved into an empty PostgreSQL database."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bicameral.backup.lock import exclusive
from bicameral.errors import ConfigError
from bicameral.redaction import without_password
from bicameral.store import is_database_url, open_database
from bicameral.store.db import Database
from bicameral.store.transfer import Transferred, TransferRefused, transfer
from bicameral.types import Clock


def migrate_db(data_dir: Path, source_path: Path, url: str, timer: Clock = time.perf_counter) -> Transferred:
    """With the assistant stopped (the data dir held exclusively throughout), every row of the SQLite file at
    `source_path` copied into `url`."""
    if not is_database_url(url):
        raise ConfigError("--to must be a postgresql:// (or postgres://) URL")
    if not source_path.is_file():
        raise TransferRefused(f"there is no SQLite database at {source_path}: nothing to migrate")
    with exclusive(data_dir, purpose="migrate-db"):
        # Opened as a start opens it: an older schema is migrated first, a newer one refused (SchemaTooNew).
        source = Database(source_path)
        try:
            target = open_database(url)
            try:
                return transfer(source, target, timer=timer)
            finally:
                target.close()
        finally:
            source.close()


def hide_password(text: str, url: str) -> str:
    """`text` with the URL shown without its password, and the password itself (as typed or decoded) gone."""
    text = text.replace(url, without_password(url))
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    for secret in {password, unquote(password or "")} - {None, ""}:
        text = text.replace(str(secret), "***")
    return text
