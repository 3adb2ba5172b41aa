"""Room on the disk that holds the data: a workspace's quota, and free space kept for the database.

One `run` once filled the file system the database lives on, and every chat stopped. There is no daemon or
quota system to ask here (the root file system has no quota feature, and a loop-mounted image per workspace
would leave mounts behind in the data dir), so `DiskWatch` measures while a command runs: free space with
statvfs on every poll (one system call), the workspace's own size by walking it only when the free space says
it may have grown past its quota. A command is stopped when its workspace grows past the quota or the disk's
free space falls under the reserve; RLIMIT_FSIZE still caps every single file. What a command can write
between two polls (0.1 s: about 30 MB on this project's disks) is the overshoot; the database has its own
reserve file for that (`store/reserve.py`).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MiB = 1 << 20
# Inodes kept free too: a command making millions of empty files fills a file system as surely as one big one.
INODES_KEPT_SHARE = 100  # 1 %
INODES_KEPT_MIN = 1000

Statvfs = Callable[[Path], os.statvfs_result]
Measure = Callable[[Path], int]


@dataclass(frozen=True)
class DiskLimits:
    quota_bytes: int = 1024 * MiB  # one workspace, everything in it
    reserve_bytes: int = 128 * MiB  # free space no command may take: the database's
    poll_seconds: float = 0.1


@dataclass(frozen=True)
class Room:
    free_bytes: int  # what an unprivileged writer may still use
    free_inodes: int
    total_inodes: int

    @property
    def inodes_kept(self) -> int:
        return max(INODES_KEPT_MIN, self.total_inodes // INODES_KEPT_SHARE) if self.total_inodes else 0


def room(path: Path, statvfs: Statvfs = os.statvfs) -> Room:
    st = statvfs(path)
    return Room(st.f_bavail * st.f_frsize, st.f_favail, st.f_files)


def usage(root: Path) -> int:
    """Bytes the tree under `root` holds on disk (allocated blocks, so a sparse file counts what it uses); links
    are not followed and a hard-linked file counts once."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue  # vanished or unreadable mid-walk: the command is still running
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
    return total


def mib(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n / MiB:.1f} MiB"


def low_space(found: Room, limits: DiskLimits) -> str | None:
    """Why no command may write now, or None."""
    if found.free_bytes < limits.reserve_bytes:
        return (
            f"the disk that holds the data is nearly full ({mib(found.free_bytes)} free; "
            f"{mib(limits.reserve_bytes)} are kept for the database)"
        )
    if found.free_inodes < found.inodes_kept:
        return f"the disk that holds the data is nearly out of inodes ({found.free_inodes} free)"
    return None


class DiskWatch:
    """One command's view of the disk: `start` says whether it may run, `check` whether it must stop."""

    def __init__(self, workspace: Path, limits: DiskLimits, *, statvfs: Statvfs = os.statvfs, measure: Measure = usage):
        self._workspace = workspace
        self._limits = limits
        self._statvfs = statvfs
        self._measure = measure
        self._used = 0  # the workspace's size when last measured
        self._free_then = 0  # free space at that moment
        self._allowed = 0  # the size this command may grow the workspace to

    async def start(self) -> str | None:
        """Why the command may not start (too little room), or None; measures the workspace once."""
        found = room(self._workspace, self._statvfs)
        if why := low_space(found, self._limits):
            return why
        self._used = await asyncio.to_thread(self._measure, self._workspace)
        self._free_then = found.free_bytes
        # A workspace already over its quota may still run a command (to delete files); it may not grow.
        self._allowed = max(self._limits.quota_bytes, self._used)
        return None

    async def check(self) -> str | None:
        """Why the command must stop now, or None."""
        found = room(self._workspace, self._statvfs)
        if why := low_space(found, self._limits):
            return why
        # Whatever the disk lost since the last measure, at most this command wrote; walk only when that could
        # put the workspace past its quota (others' writes count here too, so the walk decides).
        if self._used + (self._free_then - found.free_bytes) <= self._allowed:
            return None
        self._used = await asyncio.to_thread(self._measure, self._workspace)
        self._free_then = found.free_bytes
        if self._used > self._allowed:
            return (
                f"the workspace went past its quota of {mib(self._limits.quota_bytes)} "
                f"(it holds {mib(self._used)}): delete files in it to make room"
            )
        return None
