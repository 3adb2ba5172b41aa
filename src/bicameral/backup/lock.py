"""Whether an assistant runs on a data dir: each one holds a lock on `<data>/bicameral.lock` while it runs."""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bicameral.backup.manifest import BackupError
from bicameral.folders import safe_name

LOCK_NAME = "bicameral.lock"
HEARTBEAT_NAME = "heartbeat"  # touched by the running app's event loop: a loop that hangs stops touching it
HEARTBEATS_DIR = "heartbeats"  # workers sharing a data dir: one beat per host, so each host's health check is its own
INSTANCE_NAME = "instance_id"  # made on the first start; a backup carries it, and restore compares it


class RunningLock:
    """Held by a running assistant (the kernel drops it when the process ends, however it ends).

    Exclusive on an embedded SQLite database, so a second assistant on the same data dir stops before it touches
    anything; shared when several workers share a data dir and a database server. `restore` asks for it
    exclusively either way.
    """

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / LOCK_NAME
        self._fd: int | None = None

    def hold(self, *, alone: bool = False, tries: int = 20, pause: float = 0.05) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        mode = fcntl.LOCK_EX if alone else fcntl.LOCK_SH
        for _ in range(tries):
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                # `is_running` (a health check) holds it for a moment; a restore or another assistant for longer.
                time.sleep(pause)
                continue
            self._fd = fd
            _say_who(fd, "run")
            return
        holder = _holder(fd)
        os.close(fd)
        if holder.startswith("restore"):
            raise BackupError(f"a restore into {self._path.parent} is under way: start the assistant once it ends")
        if holder.startswith("migrate-db"):
            raise BackupError(f"its database is being migrated (migrate-db, {holder}): start the assistant once it ends")
        raise BackupError(
            f"another assistant is running on {self._path.parent} ({holder or 'its pid unknown'}): stop it, or give "
            "this one its own BICAMERAL_DATA_DIR"
        )

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextmanager
def exclusive(data_dir: Path, *, restoring: bool = True, purpose: str = "restore") -> Iterator[None]:
    """The data dir for this process alone, or a BackupError when an assistant runs on it; `purpose` names the work
    (`restore`, `migrate-db`) to the one refused."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupError(f"the assistant is running on {data_dir}: stop it first, then {purpose}") from None
        if restoring:
            _say_who(fd, purpose)
        yield
    finally:
        os.close(fd)


def is_running(data_dir: Path) -> bool:
    """True while an assistant (or a restore) holds the data dir."""
    if not (data_dir / LOCK_NAME).exists():
        return False
    try:
        with exclusive(data_dir, restoring=False):
            return False
    except BackupError:
        return True


def beat(data_dir: Path, now: float, *, host: str | None = None) -> None:
    """The running app's event loop is turning: its heartbeat file says when it last did (`host`: the one file of
    this host's workers, when several hosts share the data dir)."""
    path = _heartbeat(data_dir, host)
    try:
        path.parent.mkdir(exist_ok=True)
        path.touch()
        os.utime(path, (now, now))
    except OSError:  # a full disk: the health check reads a stale beat, which is what the owner should see
        pass


def last_beat(data_dir: Path, *, host: str | None = None) -> float | None:
    try:
        return _heartbeat(data_dir, host).stat().st_mtime
    except OSError:
        return None


def _heartbeat(data_dir: Path, host: str | None) -> Path:
    return data_dir / HEARTBEAT_NAME if host is None else data_dir / HEARTBEATS_DIR / safe_name(host, "host")


def instance_id(data_dir: Path, *, create: bool = True) -> str | None:
    """This data dir's instance id, made (a random one) when there is none yet and `create` is set."""
    path = data_dir / INSTANCE_NAME
    try:
        return path.read_text(encoding="ascii").strip() or None
    except FileNotFoundError:
        if not create:
            return None
    made = uuid.uuid4().hex
    partial = path.with_name(f".{INSTANCE_NAME}.{os.getpid()}")
    partial.write_text(made + "\n", encoding="ascii")
    try:
        os.link(partial, path)  # never replaces one another process made meanwhile
    except FileExistsError:
        return path.read_text(encoding="ascii").strip() or None
    finally:
        partial.unlink()
    return made


def _say_who(fd: int, role: str) -> None:
    """Note in the lock file who holds it (shared holders each write the same kind of line), for the one refused."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{role} pid {os.getpid()}\n".encode("ascii"), 0)
    except OSError:  # a full disk: the lock still holds, only the note is missing
        pass


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 100, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
