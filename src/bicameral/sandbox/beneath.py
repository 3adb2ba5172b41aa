"""Files and folders under a root opened one name at a time from the folder before, never through a symlink.

The path checker (`paths.resolve_inside`) reads names; the sandbox writes the same workspace at the same time,
so a folder it checked can be a symlink to `/etc` by the time the file is opened. Here each component is opened
relative to the descriptor of the folder before it with O_NOFOLLOW: whatever the checker saw, what is opened lies
beneath the root. (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS does this in one call; Python has no
binding for it.) The root itself is trusted: it is the data dir's own folder, which the sandbox cannot replace.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bicameral.sandbox.paths import PathRefused

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in is opened at once (and then refused by its type) instead of waiting for a writer.
_ENTRY = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def shown(parts: Sequence[str]) -> str:
    """A relative path for people and models: names that are not UTF-8 (a command wrote them) get U+FFFD."""
    return "/".join(os.fsencode(part).decode("utf-8", "replace") for part in parts) or "."


@contextlib.contextmanager
def folder(root: Path, parts: Sequence[str], *, make: bool = False) -> Iterator[int]:
    """A descriptor of the folder `parts` names under `root` (missing ones created with `make`), closed after.

    Raises PathRefused for a symlink or a file on the way, FileNotFoundError for a missing folder.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            child = _open_folder(fd, part, make=make)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def open_entry(folder_fd: int, name: str) -> tuple[int, os.stat_result]:
    """`name` in the folder opened for reading, a regular file or a folder, with its status; never a symlink."""
    _plain(name)
    try:
        fd = os.open(name, _ENTRY, dir_fd=folder_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link(name) from exc
        raise
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
        return fd, info
    os.close(fd)
    raise PathRefused(f"{shown([name])!r} is not a regular file or directory")


def open_file(folder_fd: int, name: str) -> tuple[int, os.stat_result]:
    """The regular file `name` in the folder, opened for reading, with its status; IsADirectoryError for a folder."""
    fd, info = open_entry(folder_fd, name)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, "is a directory", name)
    return fd, info


def replace_file(folder_fd: int, name: str, data: bytes) -> None:
    """`name` in the folder becomes `data`: a temporary file beside it renamed over it, with the old mode and owner.

    A rename replaces whatever is there by name (a symlink swapped in is replaced, its target never written), and a
    reader sees the old bytes or the new ones, never a half-written file.
    """
    _plain(name)
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", name)
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise _link(name) if stat.S_ISLNK(old.st_mode) else PathRefused(f"{shown([name])!r} is not a regular file")
    temp = f".{uuid.uuid4().hex}.part"  # fixed length: a long name plus a suffix could pass NAME_MAX
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if old is not None:
                _keep_owner_and_mode(out.fileno(), old)
        os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder_fd)
        raise


def create_new(folder_fd: int, name: str) -> int:
    """A new file `name` in the folder, opened for writing; FileExistsError when anything (a symlink too) has the name."""
    _plain(name)
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder_fd)


@dataclass(frozen=True)
class Entry:
    """One thing under a walked folder: its path below it, its kind, its size and its folder's descriptor."""

    parts: tuple[str, ...]
    is_dir: bool
    is_file: bool  # a regular file (neither: a FIFO, socket or device, listed but never opened)
    size: int
    folder_fd: int  # open only until the walk moves on


class Walk:
    """Everything under a folder, depth first in name order; symlinks are skipped, never followed.

    Bounded: at most `max_names` names are read from one folder and folders deeper than `max_depth` are not
    entered; `cut` tells whether either happened.
    """

    def __init__(self, folder_fd: int, *, max_names: int = 10_000, max_depth: int = 64) -> None:
        self._fd = folder_fd
        self._max_names = max_names
        self._max_depth = max_depth
        self.cut = False

    def __iter__(self) -> Generator[Entry, None, None]:
        return self._walk(self._fd, ())

    def _walk(self, fd: int, prefix: tuple[str, ...]) -> Generator[Entry, None, None]:
        with os.scandir(fd) as scan:
            names = [entry.name for entry in itertools.islice(scan, self._max_names)]
            if next(scan, None) is not None:
                self.cut = True
        for name in sorted(names):
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:  # gone since it was listed
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            yield Entry((*prefix, name), is_dir, stat.S_ISREG(info.st_mode), info.st_size, fd)
            if not is_dir:
                continue
            if len(prefix) + 1 >= self._max_depth:
                self.cut = True
                continue
            try:
                child = _open_folder(fd, name, make=False)
            except (PathRefused, OSError):  # swapped for a link or removed since it was listed
                continue
            try:
                yield from self._walk(child, (*prefix, name))
            finally:
                os.close(child)


def _open_folder(fd: int, name: str, *, make: bool) -> int:
    _plain(name)
    if make:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=fd)
    try:
        return os.open(name, _FOLDER, dir_fd=fd)
    except OSError as exc:
        # O_DIRECTORY | O_NOFOLLOW on a symlink says ENOTDIR (ELOOP without O_DIRECTORY): look to say which.
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except OSError:
            raise exc from None
        if stat.S_ISLNK(mode):
            raise _link(name) from exc
        raise PathRefused(f"{shown([name])!r} is not a directory") from exc


def _plain(name: str) -> None:
    """One real name: the walk goes down by names, so '', '.', '..' or a '/' would be a way around it."""
    if name in ("", ".", "..") or "/" in name or "\x00" in name:
        raise PathRefused(f"{name!r} is not a plain file or folder name")


def _link(name: str) -> PathRefused:
    return PathRefused(f"{shown([name])!r} is a symbolic link; the file tools never follow links")


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    """The new file keeps the old one's permission bits and, when we can give it away (as root), its owner."""
    if os.geteuid() == 0 and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        # A file the sandbox user made stays writable by the sandbox user after an edit.
        os.fchown(fd, old.st_uid, old.st_gid)
    os.fchmod(fd, stat.S_IMODE(old.st_mode) & 0o777)
