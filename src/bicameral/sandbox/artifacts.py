"""Files leaving a workspace: checked by the one path checker, opened without following links, copied out, capped."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from bicameral.errors import BicameralError
from bicameral.folders import safe_name
from bicameral.sandbox import beneath
from bicameral.sandbox.paths import PathRefused, resolve_inside
from bicameral.sandbox.workspace import workspace_for

# Telegram shows these inline as photos (sendPhoto takes up to 10 MB); anything else goes as a document.
_PHOTO_SUFFIXES = (".png", ".jpg", ".jpeg")
_PHOTO_MAX_BYTES = 10_000_000
OUTGOING_DIR = "outgoing"


class FileRefused(BicameralError):
    """A file that may not be sent: outside the workspace, not a regular file, empty, too big or one too many."""


@dataclass(frozen=True)
class Artifact:
    """A file the assistant sends: `name` is its path in the chat's workspace, `path` the snapshot under the data dir."""

    name: str
    path: str
    size: int
    kind: Literal["photo", "document"] = "document"


@dataclass(frozen=True)
class SendLimits:
    """How many files one turn or task may send, and how large each may be."""

    max_files: int
    max_bytes: int

    def outgoing(self) -> Outgoing:
        """An empty set of files to send, within these limits."""
        return Outgoing(max_files=self.max_files, max_bytes=self.max_bytes)


@dataclass
class Outgoing:
    """The files of one turn or task: one per workspace path, at most `max_files`, each at most `max_bytes`."""

    max_files: int = 10
    max_bytes: int = 20_000_000
    items: list[Artifact] = field(default_factory=list)
    # Called with every change, so a task's files are stored as they are chosen (a restart keeps them).
    on_change: Callable[[tuple[Artifact, ...]], None] | None = None

    def add(self, data_dir: Path, chat: str, given: str) -> Artifact:
        """Check `given` in the chat's workspace, snapshot it and keep it; raises FileRefused or PathRefused."""
        name = _shown(data_dir, chat, given)
        kept = [a for a in self.items if a.name != name]
        if len(kept) >= self.max_files:
            raise FileRefused(f"at most {self.max_files} files can be sent at once; {len(kept)} are already attached")
        artifact = snapshot(data_dir, chat, given, max_bytes=self.max_bytes)
        self.items[:] = [*kept, artifact]
        if self.on_change is not None:
            self.on_change(tuple(self.items))
        return artifact


def snapshot(data_dir: Path, chat: str, given: str, *, max_bytes: int) -> Artifact:
    """Copy a workspace file to `<data>/outgoing/<chat>/`, so what is sent is what was checked, even much later."""
    root, parts = _checked(data_dir, chat, given)
    if not parts:
        raise FileRefused(f"{given!r} is the workspace itself; send the files in it one by one (or an archive of them)")
    # Opened a name at a time, never through a link: a folder swapped for a symlink after the check is refused, not read.
    try:
        with beneath.folder(root, parts[:-1]) as parent:
            fd, info = beneath.open_file(parent, parts[-1])
    except FileNotFoundError as exc:
        raise FileRefused(f"no file {given!r} in the workspace") from exc
    except IsADirectoryError as exc:
        raise FileRefused(f"{given!r} is a directory; send the files in it one by one (or an archive of them)") from exc
    except OSError as exc:
        raise PathRefused(f"{given!r} cannot be opened as a plain file ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as src:
        if info.st_size == 0:
            raise FileRefused(f"{given!r} is empty; there is nothing to send")
        if info.st_size > max_bytes:
            raise FileRefused(f"{given!r} is {info.st_size} bytes; files of at most {max_bytes} bytes can be sent")
        # A folder of its own per snapshot: the file keeps its name, which is what the user sees.
        folder_path = data_dir / OUTGOING_DIR / safe_name(chat, "chat") / uuid.uuid4().hex[:12]
        folder_path.mkdir(parents=True)
        dest = folder_path / safe_name(parts[-1])
        with dest.open("xb") as out:
            # Bounded: a file that grows while it is read (a command still writing it) cannot fill the disk.
            data = src.read(max_bytes + 1)
            out.write(data)
            copied = len(data)
    if copied > max_bytes:
        dest.unlink(missing_ok=True)
        raise FileRefused(f"{given!r} grew past {max_bytes} bytes while it was being read")
    kind: Literal["photo", "document"] = (
        "photo" if PurePosixPath(parts[-1]).suffix.lower() in _PHOTO_SUFFIXES and copied <= _PHOTO_MAX_BYTES else "document"
    )
    return Artifact(name=beneath.shown(parts), path=dest.relative_to(data_dir).as_posix(), size=copied, kind=kind)


def discard(data_dir: Path, path: str) -> bool:
    """Delete a snapshot (and its folder, once empty) after it was sent; anything outside the outgoing folder is left alone."""
    target = _snapshot(data_dir, path)
    if target is None or not target.is_file():
        return False
    target.unlink()
    if target.parent != (data_dir / OUTGOING_DIR).resolve():
        with contextlib.suppress(OSError):  # not empty: something else lives there, keep it
            target.parent.rmdir()
    return True


def prune(data_dir: Path, *, keep: Set[str], finished: Set[str], older_than: float) -> int:
    """Delete snapshots not in `keep` that were already sent or given up (`finished`) or are older than `older_than`."""
    root = data_dir / OUTGOING_DIR
    if not root.is_dir():
        return 0
    gone = 0
    for chat in root.iterdir():
        for folder in chat.iterdir() if chat.is_dir() and not chat.is_symlink() else ():
            for file in folder.iterdir() if folder.is_dir() and not folder.is_symlink() else ():
                path = file.relative_to(data_dir).as_posix()
                if path in keep or not (path in finished or file.lstat().st_mtime < older_than):
                    continue
                gone += discard(data_dir, path)
        with contextlib.suppress(OSError):
            chat.rmdir()
    return gone


def available(data_dir: Path, artifact: Artifact) -> bool:
    """True while the artifact's snapshot is still a regular file inside the outgoing folder."""
    target = _snapshot(data_dir, artifact.path)
    return target is not None and target.is_file()


def _snapshot(data_dir: Path, path: str) -> Path | None:
    """The snapshot file `path` (relative to the data dir) names, or None unless it lies inside the outgoing folder."""
    root = (data_dir / OUTGOING_DIR).resolve()
    try:
        target = resolve_inside(root, PurePosixPath(path).relative_to(OUTGOING_DIR).as_posix())
    except (PathRefused, ValueError):
        return None
    return None if (data_dir / path).is_symlink() else target


def _shown(data_dir: Path, chat: str, given: str) -> str:
    """The workspace-relative name of `given`, symlinks inside the workspace resolved; raises PathRefused."""
    return beneath.shown(_checked(data_dir, chat, given)[1])


def _checked(data_dir: Path, chat: str, given: str) -> tuple[Path, tuple[str, ...]]:
    """The chat's workspace (resolved) and the names of `given` below it, as the one path checker sees them."""
    root = workspace_for(data_dir, chat).resolve()
    return root, resolve_inside(root, given).relative_to(root).parts
