"""Space held on the data disk for the database: a file allocated while there is room, given back when there is not.

A full disk once stopped every chat: no message could be stored, so none was answered. The sandbox keeps its
commands out of the last `size` bytes (`sandbox/disk.py`), but anything else on the host can still fill the disk.
`<data>/.reserve` holds `size` bytes allocated in advance; when the free space falls under half of that, or SQLite
says the disk is full, the file is deleted so the database can go on committing, and the owner is told. Once
twice its size is free again, it is allocated anew.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bicameral.types import Clock

log = logging.getLogger(__name__)

RESERVE_NAME = ".reserve"
CHECK_EVERY_SECONDS = 1.0  # statvfs is cheap, but not needed before every one of a burst's commits


class DiskReserve:
    """The reserve file of one data dir; `check()` before writes, `disk_full()` when SQLite reports SQLITE_FULL."""

    def __init__(
        self,
        data_dir: Path,
        size: int,
        *,
        on_low: Callable[[int], object] | None = None,
        statvfs: Callable[[Path], os.statvfs_result] = os.statvfs,
        clock: Clock = time.monotonic,
    ) -> None:
        self.path = data_dir / RESERVE_NAME
        self.size = size
        self.low = False  # the disk ran short and nothing has been given back to the reserve since
        self._on_low = on_low
        self._statvfs = statvfs
        self._clock = clock
        self._checked_at: float | None = None
        self._lock = threading.Lock()
        self.restoring: threading.Thread | None = None  # allocating the file again, off the writer's thread

    def free(self) -> int:
        st = self._statvfs(self.path.parent)
        return st.f_bavail * st.f_frsize

    def held(self) -> int:
        """Bytes the reserve file holds on disk now."""
        try:
            return self.path.stat().st_blocks * 512
        except FileNotFoundError:
            return 0

    def ensure(self) -> bool:
        """Allocate the file when it is missing or short and the disk keeps `size` free beside it; True when held."""
        if self.size <= 0:
            return False
        if self.held() >= self.size:
            return True
        if self.free() < 2 * self.size:
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)  # real blocks, not a sparse file's promise
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("could not allocate the disk reserve %s (%s)", self.path, exc.strerror)
            with contextlib.suppress(OSError):
                self.path.unlink()
            return False
        return True

    def check(self) -> None:
        """Before a write: give the reserve back when the disk runs short, allocate it again when there is room."""
        if self.size <= 0:
            return
        now = self._clock()
        if self._checked_at is not None and now - self._checked_at < CHECK_EVERY_SECONDS:
            return
        self._checked_at = now
        free = self.free()
        if free < self.size // 2:
            self._ran_short(free)
        elif self.low and free >= 2 * self.size and (self.restoring is None or not self.restoring.is_alive()):
            # Allocating can mean writing the whole size where the file system cannot fallocate: not in a commit.
            self.restoring = threading.Thread(target=self._restore, name="disk-reserve", daemon=True)
            self.restoring.start()

    def disk_full(self) -> None:
        """SQLite could not write: the reserve goes now, so the next attempt has room."""
        if self.size > 0:
            self._ran_short(self.free())

    def _ran_short(self, free: int) -> None:
        with self._lock:
            first = not self.low
            self.low = True
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
                log.warning("the data disk is nearly full (%d bytes free): the %d-byte reserve was given to the database",
                            free, self.size)
        if first and self._on_low is not None:
            self._on_low(free)

    def _restore(self) -> None:
        with self._lock:
            if self.low and self.ensure():
                self.low = False
                log.info("the data disk has room again: the %d-byte reserve is held again", self.size)
