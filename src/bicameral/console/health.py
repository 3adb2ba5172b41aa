"""/health: how the process is doing, from its own state (the stores, /proc, the disk), without a model call."""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bicameral.console.desk import Asked, OwnerCommand
from bicameral.console.times import ago, ahead, span, utc_clock
from bicameral.store.messages import MessageStore
from bicameral.store.outbox import OutboxStore
from bicameral.store.schedules import ScheduleStore
from bicameral.tasks.store import TaskStore
from bicameral.types import Clock

HOUR = 3600.0
# The data dir is walked for its size on every /health: past this many entries the figure is a lower bound.
MAX_WALKED = 100_000
# What stays true of the tool-error breakers (agent/breakers.py): each turn, task step or Claude Code turn makes
# its own, and one that trips ends that run. None is kept between runs, so none can be open between them.
PER_RUN_BREAKERS = "none open (the tool-error breakers belong to one turn or task run and end it when they trip)"


@dataclass(frozen=True)
class HealthSources:
    """What /health reads; `model_status` and `breakers` give one line per model or breaker the process keeps."""

    messages: MessageStore
    outbox: OutboxStore
    tasks: TaskStore
    schedules: ScheduleStore
    data_dir: Path
    started_at: float
    paused: Callable[[], bool]
    model_status: Callable[[], Sequence[str]]
    breakers: Callable[[], Sequence[str]] = lambda: ()
    clock: Clock = time.time


@dataclass(frozen=True)
class DiskUse:
    used: int  # bytes the data dir's files take on disk
    files: int
    complete: bool  # False: the walk stopped at MAX_WALKED entries, `used` is a lower bound
    free: int | None  # bytes free on its file system, None when that cannot be read
    total: int | None


def health_command(sources: HealthSources) -> OwnerCommand:
    async def health(asked: Asked) -> str:
        disk = await asyncio.to_thread(disk_use, sources.data_dir)
        return health_text(sources, asked.inbound.row_id, disk)

    return OwnerCommand("health", "/health", "uptime, queues, due reminders, models, memory and disk", health)


def health_text(sources: HealthSources, asking_row: int | None, disk: DiskUse) -> str:
    now = sources.clock()
    tasks = sources.tasks.open_counts()
    due = sources.schedules.due_by(now + HOUR)
    task_counts = f"{tasks.get('pending', 0)} queued, {tasks.get('running', 0)} running"
    if tasks.get("paused"):
        task_counts += f", {tasks['paused']} paused"
    breakers = list(sources.breakers()) or [PER_RUN_BREAKERS]
    lines = [
        f"Health at {utc_clock(now, now)}",
        f"Process uptime: {span(now - sources.started_at)} (started {utc_clock(sources.started_at, now)})",
        f"Paused: {'yes, answering only you (/resume)' if sources.paused() else 'no'}",
        *queue_lines(sources.messages, sources.outbox, now, asking_row),
        f"Tasks: {task_counts}",
        f"Reminders due in the next hour: {_due(due.get('text'), now)}",
        f"Scheduled tasks due in the next hour: {_due(due.get('task'), now)}",
        "Breakers: " + breakers[0],
        *(f"- {line}" for line in breakers[1:]),
        "Models:",
        *(f"- {line}" for line in sources.model_status()),
        f"Memory: {process_memory()}",
        f"Disk: {_disk(disk)}",
    ]
    return "\n".join(lines)


def queue_lines(messages: MessageStore, outbox: OutboxStore, now: float, asking_row: int | None = None) -> list[str]:
    """The traffic figures, for /health and for `bicameral doctor --live`."""
    inbox = messages.pending_count()
    waiting, oldest = outbox.waiting()
    waiting_since = f" (oldest recorded {ago(oldest, now)})" if waiting and oldest is not None else ""
    return [
        f"Last message in: {ago(messages.last_inbound_before(asking_row), now)}",
        f"Last message sent: {ago(messages.last_sent_at(), now)}",
        f"Inbox: {inbox} not yet answered",
        f"Outbox: {waiting} not yet delivered{waiting_since}",
    ]


def _due(due: tuple[int, float] | None, now: float) -> str:
    if due is None:
        return "none"
    count, first = due
    return f"{count}, the first {ahead(first, now)}"


def _disk(disk: DiskUse) -> str:
    used = f"{'at least ' if not disk.complete else ''}{size(disk.used)} in {disk.files} files"
    if disk.free is None or disk.total is None:
        return f"data dir {used}; free space unknown"
    return f"data dir {used}; {size(disk.free)} free of {size(disk.total)}"


def size(count: int) -> str:
    """Bytes in binary units: "812 B", "3.4 KiB", "58.2 MiB", "1.2 GiB"."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def process_memory(status: Path = Path("/proc/self/status")) -> str:
    """Resident memory now and at its peak, from /proc; where there is none, the peak getrusage reports."""
    try:
        fields = dict(line.split(":", 1) for line in status.read_text(encoding="ascii").splitlines() if ":" in line)
        rss, peak = (int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmHWM"))
    except (OSError, KeyError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        return f"peak {size(peak)} resident (the current figure cannot be read here)"
    return f"{size(rss)} resident (peak {size(peak)})"


def disk_use(root: Path, max_entries: int = MAX_WALKED) -> DiskUse:
    """The space the files under `root` take (symlinks not followed), bounded, and the file system's free space."""
    used = files = walked = 0
    complete = True
    folders = [root]
    while folders and complete:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    walked += 1
                    if walked > max_entries:
                        complete = False
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # gone since it was listed, or unreadable
                    if stat.S_ISDIR(info.st_mode):
                        folders.append(Path(entry.path))
                        continue
                    files += 1
                    blocks = getattr(info, "st_blocks", None)
                    used += blocks * 512 if blocks is not None else info.st_size
        except OSError:
            continue  # a folder that vanished or cannot be read: counted as empty
    try:
        usage = shutil.disk_usage(root)
    except OSError:
        return DiskUse(used, files, complete, None, None)
    return DiskUse(used, files, complete, usage.free, usage.total)
