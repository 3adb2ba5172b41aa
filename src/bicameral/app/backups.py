"""Backups as the app runs them: `bicameral backup` / `restore`, the data dir held while running, the nightly one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from pathlib import Path

from bicameral.backup import BackupPlan, Manifest, RunningLock, beat, make_backup, prune_backups, restore_backup
from bicameral.backup.archive import nightly_name
from bicameral.backup.lock import instance_id
from bicameral.backup.restore import Restored
from bicameral.config import Settings
from bicameral.store.schedule_times import next_cron
from bicameral.types import Clock, Sleep

log = logging.getLogger(__name__)

NIGHTLY_CRON = "30 3 * * *"  # on the owner's wall clock (BICAMERAL_TIMEZONE): a quiet hour
HEARTBEAT_SECONDS = 30.0  # `doctor --live` calls the app hung when its beat is more than three of these old


def backup_dir(settings: Settings) -> Path:
    """Where the nightly backups go: BICAMERAL_BACKUP_DIR, else `backups` beside the data dir."""
    return settings.backup_dir or settings.data_dir.absolute().parent / "backups"


def backup_plan(settings: Settings) -> BackupPlan:
    return BackupPlan(settings.data_dir, _version(), left_out=(backup_dir(settings),), database_url=_database_url(settings))


def backup_to(settings: Settings, dest: Path, clock: Clock = time.time) -> Manifest:
    """`bicameral backup PATH`: the data dir into a new folder or tar file, the assistant running or not."""
    return make_backup(backup_plan(settings), dest, clock())


def restore_from(settings: Settings, source: Path, clock: Clock = time.time) -> Restored:
    """`bicameral restore PATH`: with the assistant stopped, the data dir's content replaced by the backup's."""
    return restore_backup(
        settings.data_dir, source, clock(), keep=(backup_dir(settings),), database_url=_database_url(settings)
    )


def _database_url(settings: Settings) -> str | None:
    """PostgreSQL's URL when the database is there (its backup is a pg_dump); None for SQLite in the data dir."""
    return settings.database_url.get_secret_value() if settings.database_url is not None else None


class NightlyBackups:
    """A backup into the backup folder every night, the newest `keep` kept; the timer sleeps until the next one."""

    def __init__(self, settings: Settings, *, clock: Clock = time.time, sleep: Sleep = asyncio.sleep) -> None:
        self._plan = backup_plan(settings)
        self._folder = backup_dir(settings)
        self._keep = settings.backup_keep
        self._tz = settings.timezone
        self._clock = clock
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._keep > 0:
            self._task = asyncio.create_task(self._run(), name="nightly-backup")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            now = self._clock()
            await self._sleep(max(next_cron(NIGHTLY_CRON, self._tz, now) - now, 0.0))
            await asyncio.to_thread(self.once)

    def once(self) -> Path | None:
        """One nightly backup and the pruning after it; a failure is logged and tried again the next night."""
        now = self._clock()
        dest = self._folder / nightly_name(now)
        try:
            make_backup(self._plan, dest, now)
        except Exception:
            log.exception("the nightly backup into %s failed", self._folder)
            return None
        for gone in prune_backups(self._folder, self._keep):
            log.info("deleted the old backup %s", gone)
        log.info("backed up the data dir into %s", dest)
        return dest


class Running:
    """What a running app holds on its data dir: the lock `restore` checks, the instance id, the nightly backups."""

    def __init__(self, settings: Settings, clock: Clock, *, nightly: bool = True) -> None:
        self._lock = RunningLock(settings.data_dir)
        self._lock.hold(alone=settings.database_url is None)  # one assistant per SQLite data dir; workers share one
        try:
            instance_id(settings.data_dir)  # made on the first start
        except OSError as exc:  # a full disk must not keep the assistant from starting: the first backup makes it
            log.warning("the instance id could not be written (%s)", exc)
        self.nightly = NightlyBackups(settings, clock=clock)
        if nightly:  # of several workers, the serving one backs up
            self.nightly.start()
        # Workers share the data dir (PostgreSQL): each host beats a file of its own for its own health check.
        host = socket.gethostname() if settings.database_url is not None else None
        self._heart = asyncio.create_task(self._beat(settings.data_dir, clock, host), name="heartbeat")

    async def close(self) -> None:
        self._heart.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._heart
        await self.nightly.stop()
        self._lock.release()

    @staticmethod
    async def _beat(data_dir: Path, clock: Clock, host: str | None) -> None:
        while True:
            beat(data_dir, clock())
            if host is not None:
                beat(data_dir, clock(), host=host)
            await asyncio.sleep(HEARTBEAT_SECONDS)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bicameral")
    except PackageNotFoundError:
        return "unknown"
