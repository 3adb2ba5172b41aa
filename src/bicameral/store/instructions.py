"""Instruction files: standing orders for every chat or one chat, each edit backed up and undoable.

`<data dir>/instructions/global.md` applies everywhere, `instructions/chats/<chat>.md` in one chat.
A file that exists must have been read (and not changed since) before it is overwritten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bicameral.redaction import scrub
from bicameral.store.memory_files import MAX_FILE_BYTES, encode_name, inside, write_file

log = logging.getLogger(__name__)

BACKUPS = ".backups"
MAX_INSTRUCTION_CHARS = 8000


class InstructionsRefused(ValueError):
    """An edit that would lose something: an unread file, a file changed since it was read, no backup to undo."""


@dataclass(frozen=True)
class Instruction:
    where: str  # "global" or "chat"
    text: str


class Instructions:
    def __init__(self, root: Path, clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self._clock = clock
        self._read: dict[Path, tuple[int, int]] = {}  # what was read, as (mtime_ns, size); cleared by a restart

    def path(self, where: str, chat: str) -> Path:
        if where == "global":
            return self.root / "global.md"
        if where == "chat":
            return self.root / "chats" / f"{encode_name(chat)}.md"
        raise ValueError(f"instructions are 'global' or for this 'chat', not {where!r}")

    def for_chat(self, chat: str) -> list[Instruction]:
        """What applies in a chat, global first; unreadable files are logged and skipped."""
        found = []
        for where in ("global", "chat"):
            text = self._load(self.path(where, chat))
            if text and text.strip():
                found.append(Instruction(where, text.strip()))
        return found

    def read(self, where: str, chat: str) -> str | None:
        """The file's text (None when there is none yet); reading it allows the next write."""
        path = self.path(where, chat)
        text = self._load(path)
        if text is not None:
            self._read[path] = _stamp(path)
        return text

    def write(self, where: str, chat: str, text: str) -> Path | None:
        """Replace the file, keeping the old text as a timestamped backup (returned)."""
        text = scrub(text).strip()
        if len(text) > MAX_INSTRUCTION_CHARS:
            raise InstructionsRefused(f"instructions are at most {MAX_INSTRUCTION_CHARS} characters; this is {len(text)}")
        path = self.path(where, chat)
        if path.exists():
            seen = self._read.get(path)
            if seen is None:
                raise InstructionsRefused("read the current instructions first, so nothing in them is lost unseen")
            if seen != _stamp(path):
                raise InstructionsRefused("the instructions changed since you read them; read them again first")
        backup = self._backup(path)
        write_file(self.root, path, text + "\n")
        self._read[path] = _stamp(path)
        return backup

    def undo(self, where: str, chat: str) -> str:
        """Put back the text before the last edit (the current one is backed up too, so undo can be undone)."""
        path = self.path(where, chat)
        backups = self.backups(path)
        if not backups:
            raise InstructionsRefused("there is no earlier version to go back to")
        previous = backups[-1].read_text(encoding="utf-8")
        self._backup(path)
        backups[-1].unlink()
        write_file(self.root, path, previous)
        self._read[path] = _stamp(path)
        return previous

    def backups(self, path: Path) -> list[Path]:
        folder = self.root / BACKUPS
        rel = path.relative_to(self.root).as_posix().replace("/", "~")
        return sorted(folder.glob(f"{rel}.*.md")) if folder.is_dir() else []

    def _backup(self, path: Path) -> Path | None:
        if not path.exists():
            return None
        folder = self.root / BACKUPS
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(self._clock(), UTC).strftime("%Y%m%dT%H%M%S%fZ")
        rel = path.relative_to(self.root).as_posix().replace("/", "~")
        backup = folder / f"{rel}.{stamp}.md"
        write_file(self.root, backup, path.read_text(encoding="utf-8"))
        return backup

    def _load(self, path: Path) -> str | None:
        if not path.exists():
            return None
        try:
            if not inside(self.root, path):
                raise ValueError("it is a symlink or lies outside the instructions folder")
            if path.stat().st_size > MAX_FILE_BYTES:
                raise ValueError(f"it is over {MAX_FILE_BYTES} bytes")
            return path.read_bytes().decode("utf-8")
        except (OSError, ValueError) as exc:
            log.warning("instructions file %s skipped: %s", path, exc)
            return None


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size
