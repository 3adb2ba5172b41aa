"""A test's own connection to the database its app uses, whichever engine the run chose (SQLite or PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bicameral.config import Settings
from bicameral.store import open_database
from bicameral.store.sql import SqlDatabase


@contextmanager
def app_database(settings: Settings) -> Iterator[SqlDatabase]:
    """The app's database opened beside it (statements in SQLite's dialect, as the stores write them); closed after."""
    db = open_database(settings.database_location)
    try:
        yield db
    finally:
        db.close()
