"""`context.files` of an owner-made command granted `files`: the asking chat's workspace under the file tools' rules."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bicameral.commands import Files, FilesFor
from bicameral.sandbox.beneath import Walk, folder, open_file, replace_file, shown
from bicameral.sandbox.paths import PathRefused, lone_surrogate
from bicameral.threads import in_tool_thread
from bicameral.tools.files import MAX_LIST_ENTRIES, MAX_WRITE_BYTES, place_in, refusal


class ChatFiles:
    """One chat's workspace as a command sees it: the file tools' path check, opens that never follow a symlink, their
    size limits; a refusal raises ValueError with the file tools' sentence (a command catches ValueError)."""

    def __init__(self, data_dir: Path, chat: str) -> None:
        self.data_dir = data_dir
        self.chat = chat

    async def read(self, path: str) -> str:
        """The whole text of a file (as edit_file reads one: at most MAX_WRITE_BYTES)."""
        try:
            place = place_in(self.data_dir, self.chat, path)
            if not place.parts:
                raise ValueError(f"{path!r} is a directory")
            with folder(place.root, place.parts[:-1]) as parent:
                fd, info = open_file(parent, place.parts[-1])
                with os.fdopen(fd, "rb") as fh:
                    raw = fh.read(MAX_WRITE_BYTES + 1) if info.st_size <= MAX_WRITE_BYTES else b""
        except (PathRefused, OSError) as exc:
            raise ValueError(refusal(path, exc)) from None
        if info.st_size > MAX_WRITE_BYTES or len(raw) > MAX_WRITE_BYTES:
            raise ValueError(f"{path!r} is larger than {MAX_WRITE_BYTES} bytes")
        return raw.decode("utf-8", errors="replace")

    async def write(self, path: str, text: str) -> None:
        """Create or replace a file (folders made), as write_file does."""
        if problem := lone_surrogate("content", text):
            raise ValueError(problem)
        data = text.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ValueError(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
        try:
            place = place_in(self.data_dir, self.chat, path)
            if not place.parts:
                raise ValueError(f"{path!r} is a directory")
            with folder(place.root, place.parts[:-1], make=True) as parent:
                replace_file(parent, place.parts[-1], data)
        except (PathRefused, OSError) as exc:
            raise ValueError(refusal(path, exc)) from None

    async def list(self, path: str = ".") -> list[str]:
        """Everything under a folder as list_files walks it (symlinks skipped), folders ending in `/`."""
        try:
            place = place_in(self.data_dir, self.chat, path)
        except PathRefused as exc:
            raise ValueError(str(exc)) from None
        return await in_tool_thread(self.chat, _walk, place.root, place.parts, path)


def _walk(root: Path, parts: tuple[str, ...], given: str) -> list[str]:
    names: list[str] = []
    try:
        with folder(root, parts) as fd, contextlib.closing(iter(Walk(fd))) as entries:
            for entry in entries:
                if len(names) >= MAX_LIST_ENTRIES:
                    break
                name = shown(parts + entry.parts)
                names.append(f"{name}/" if entry.is_dir else name)
    except (PathRefused, OSError) as exc:
        raise ValueError(refusal(given, exc, missing="directory")) from None
    return names


def workspace_files(data_dir: Path) -> FilesFor:
    """Given a chat, its workspace's files for a command granted `files` (only that chat's, whoever's command it is)."""

    def of(chat: str) -> Files:
        return ChatFiles(data_dir, chat)

    return of
