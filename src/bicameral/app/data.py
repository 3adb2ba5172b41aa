"""The data dir: made ready, its stores opened, and what earlier runs left behind pruned."""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Callable

from bicameral.config import Settings
from bicameral.errors import ConfigError
from bicameral.redaction import Redactor
from bicameral.sandbox.artifacts import OUTGOING_DIR, prune
from bicameral.store import Stores
from bicameral.store.reserve import DiskReserve
from bicameral.store.sql import DatabaseError, SchemaTooNew
from bicameral.tasks.store import TaskStore

log = logging.getLogger(__name__)


def prepare_data_dir(settings: Settings) -> None:
    """Create the data dir, or raise a ConfigError that says what to fix."""
    data_dir = settings.data_dir
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"the data dir {data_dir} is a file, not a directory: set BICAMERAL_DATA_DIR to a directory") from None
    except OSError as exc:
        raise ConfigError(f"the data dir {data_dir} cannot be created ({exc.strerror}): set BICAMERAL_DATA_DIR") from None
    try:
        with tempfile.TemporaryFile(dir=data_dir):
            pass
    except OSError as exc:
        raise ConfigError(
            f"the data dir {data_dir} is not writable ({exc.strerror}): make it writable or set BICAMERAL_DATA_DIR"
        ) from None


def open_stores(settings: Settings) -> Stores:
    """The stores (SQLite under the data dir, or the configured PostgreSQL), or a ConfigError that says what to fix."""
    prepare_data_dir(settings)
    data_dir = settings.data_dir
    try:
        return Stores.open(
            settings.database_location, redact=Redactor(settings.secret_values()),
            committed_memory=settings.memory_committed_dir, data_dir=data_dir,
        )
    except ConfigError:
        raise  # a database server that cannot be reached says so itself, without the password
    except SchemaTooNew as exc:
        raise ConfigError(str(exc)) from None
    except DatabaseError as exc:
        if settings.database_url is not None:
            raise ConfigError(f"the database refused to start: {exc}") from None
        raise ConfigError(
            f"the database in {data_dir} cannot be opened ({exc}): make the data dir writable or set BICAMERAL_DATA_DIR"
        ) from None
    except Exception as exc:
        raise ConfigError(
            f"the database in {data_dir} cannot be opened ({exc}): make the data dir writable or set BICAMERAL_DATA_DIR"
        ) from None


def keep_reserve(settings: Settings, stores: Stores, on_low: Callable[[], None]) -> None:
    """Space kept for SQLite on the data dir's disk, given to it when the disk fills (a server keeps its own)."""
    if not stores.db.on_disk:
        return
    loop = asyncio.get_running_loop()
    reserve = DiskReserve(settings.data_dir, settings.disk_reserve_mb << 20,
                          on_low=lambda free: loop.call_soon_threadsafe(on_low))
    reserve.ensure()
    stores.db.reserve = reserve


def prune_outgoing(settings: Settings, stores: Stores, tasks: TaskStore, now: float) -> None:
    """Copies of sent files a previous process left: gone once sent, or after the retention, unless still to be sent."""
    root = settings.data_dir / OUTGOING_DIR
    if not root.is_dir() or not any(root.iterdir()):
        return  # the usual start: nothing to look up
    keep = stores.outbox.file_paths(pending=True) | tasks.held_files()
    finished = stores.outbox.file_paths(pending=False)
    gone = prune(settings.data_dir, keep=keep, finished=finished, older_than=now - settings.outgoing_keep_days * 86400)
    if gone:
        log.info("deleted %d copies of sent files", gone)


def prune_sent(settings: Settings, stores: Stores, now: float) -> None:
    """The outbox's record of what went out, past the same retention: bookkeeping only, so it cannot grow forever."""
    forgotten = stores.outbox.prune_finished(now - settings.outgoing_keep_days * 86400)
    if forgotten:
        log.info("forgot %d sent or given-up outbox entries", forgotten)
