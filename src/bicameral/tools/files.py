"""File tools confined to the chat's workspace: read, write, edit, list, search and send.

Every path goes through the one checker (`resolve_inside`) for a clear refusal, and every open through
`sandbox.beneath`, which never follows a symlink: the sandbox writes the same workspace while a tool runs.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import stat
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bicameral.events import SendFile
from bicameral.sandbox.artifacts import FileRefused
from bicameral.sandbox.beneath import Walk, folder, open_entry, open_file, replace_file, shown
from bicameral.sandbox.paths import PathRefused, lone_surrogate, resolve_inside
from bicameral.sandbox.workspace import workspace_for
from bicameral.threads import in_tool_thread
from bicameral.tools.base import Tool, ToolContext, ToolResult

# Below the registry's result cap so the note about what was cut survives.
MAX_READ_BYTES = 16_000
MAX_WRITE_BYTES = 2_000_000
MAX_LIST_ENTRIES = 500
MAX_SEARCH_HITS = 200
MAX_OFFSET = 2**63 - 1  # the largest offset a file can have (off_t)
# A pattern comes from a model or a user: it runs in a worker thread, each call under a timeout, so a runaway one
# (nested repeats backtrack exponentially) costs at most this long and never holds the event loop.
SEARCH_SECONDS = 2.0
SEARCH_FILE_SECONDS = 1.0
# `regex` also unrolls every repeat to its least count when it compiles, in C and holding the GIL: (a{1000}){1000}
# took 1.4 s and 270 MB, (a{60000}){60000} all the memory there was. So a pattern is measured before it is compiled,
# on the tree of the standard library's own parser (what `re` accepts; `re` itself unrolls nothing).
MAX_PATTERN_STEPS = 20_000
_sre_parser: Any = importlib.import_module("re._parser")
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_PATH = "Path relative to the chat's workspace, e.g. notes/todo.txt."


class PathArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)


class ReadArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET, description="Byte to start at, to read a large file in pieces.")


class ListArgs(BaseModel):
    path: str = Field(default=".", max_length=1024, description="Directory relative to the workspace.")


class WriteArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    content: str = Field(max_length=MAX_WRITE_BYTES, description="The whole new text of the file.")


class EditArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    old: str = Field(min_length=1, max_length=MAX_WRITE_BYTES, description="Exact text to replace; it must occur exactly once.")
    new: str = Field(max_length=MAX_WRITE_BYTES, description="The replacement text.")


class SearchArgs(BaseModel):
    pattern: str = Field(min_length=1, max_length=200, description="Text to look for (a regular expression).")
    path: str = Field(default=".", max_length=1024, description="Directory to search, relative to the workspace.")


class SendArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    caption: str | None = Field(default=None, max_length=1000, description="One short line shown with the file.")


@dataclass(frozen=True)
class _Place:
    """A checked path: the workspace (resolved) and the names below it, links inside the workspace resolved."""

    root: Path
    parts: tuple[str, ...]

    @property
    def shown(self) -> str:
        return shown(self.parts)


def place_in(data_dir: Path, chat: str, given: str) -> _Place:
    root = workspace_for(data_dir, chat).resolve()
    return _Place(root, resolve_inside(root, given).relative_to(root).parts)


def refusal(given: str, exc: PathRefused | OSError, *, missing: str = "file") -> str:
    """One clear sentence for a path that could not be used (the file tools' and a command's `context.files`)."""
    if isinstance(exc, PathRefused):
        return str(exc)
    if isinstance(exc, FileNotFoundError):
        return f"no {missing} {given!r} in the workspace"
    if isinstance(exc, IsADirectoryError):
        return f"{given!r} is a directory"
    return f"cannot use {given!r}: {exc.strerror or exc}"


class ReadFile(Tool[ReadArgs]):
    name = "read_file"
    description = f"Read a text file from this chat's workspace, {MAX_READ_BYTES} bytes at a time (offset for more)."
    args_model = ReadArgs
    reads_files = True

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        try:
            place = place_in(ctx.data_dir, ctx.chat, args.path)
            if not place.parts:
                return ToolResult.error(f"{args.path!r} is the workspace itself; list it with list_files")
            with folder(place.root, place.parts[:-1]) as parent:
                fd, info = open_file(parent, place.parts[-1])
                try:
                    size = info.st_size
                    if args.offset > size:
                        return ToolResult.error(f"offset {args.offset} is past the end of the file (size {size} bytes)")
                    data = os.pread(fd, MAX_READ_BYTES, args.offset)
                finally:
                    os.close(fd)
        except (PathRefused, OSError) as exc:
            return ToolResult.error(refusal(args.path, exc))
        if not data and size:
            return ToolResult(f"[offset {args.offset} is the end of the file (size {size} bytes); there is no more]")
        text = data.decode("utf-8", errors="replace")
        end = args.offset + len(data)
        if end < size:
            text += f"\n[cut: showed bytes {args.offset}-{end} of {size}; read again with offset={end}]"
        return ToolResult(text)


class WriteFile(Tool[WriteArgs]):
    name = "write_file"
    description = "Create or overwrite a text file in this chat's workspace (directories are created)."
    args_model = WriteArgs
    reads_files = True

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        if problem := lone_surrogate("content", args.content):
            return ToolResult.error(problem)
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            return ToolResult.error(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
        try:
            place = place_in(ctx.data_dir, ctx.chat, args.path)
            if not place.parts:
                return ToolResult.error(f"{args.path!r} is a directory")
            with folder(place.root, place.parts[:-1], make=True) as parent:
                replace_file(parent, place.parts[-1], data)
        except (PathRefused, OSError) as exc:
            return ToolResult.error(refusal(args.path, exc))
        return ToolResult(f"wrote {len(data)} bytes to {place.shown}")


class EditFile(Tool[EditArgs]):
    name = "edit_file"
    description = "Replace one exact piece of text in a workspace file (it must occur exactly once)."
    args_model = EditArgs
    reads_files = True

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        for field, value in (("old", args.old), ("new", args.new)):
            if problem := lone_surrogate(field, value):
                return ToolResult.error(problem)
        try:
            place = place_in(ctx.data_dir, ctx.chat, args.path)
            if not place.parts:
                return ToolResult.error(f"{args.path!r} is a directory")
            with folder(place.root, place.parts[:-1]) as parent:
                fd, info = open_file(parent, place.parts[-1])
                with os.fdopen(fd, "rb") as fh:
                    raw = fh.read(MAX_WRITE_BYTES + 1) if info.st_size <= MAX_WRITE_BYTES else b""
                if info.st_size > MAX_WRITE_BYTES or len(raw) > MAX_WRITE_BYTES:
                    return ToolResult.error(f"{args.path!r} is larger than {MAX_WRITE_BYTES} bytes; edit it with run instead")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    # Decoding with replacement and writing back would silently change every byte that is not text.
                    return ToolResult.error(f"{args.path!r} is not UTF-8 text; edit it with run instead")
                count = text.count(args.old)
                if count != 1:
                    return ToolResult.error(
                        f"the text to replace occurs {count} times in {args.path!r}; it must occur exactly once"
                    )
                updated = text.replace(args.old, args.new).encode("utf-8")
                if len(updated) > MAX_WRITE_BYTES:
                    return ToolResult.error(f"the edited file would be {len(updated)} bytes; the limit is {MAX_WRITE_BYTES}")
                replace_file(parent, place.parts[-1], updated)
        except (PathRefused, OSError) as exc:
            return ToolResult.error(refusal(args.path, exc))
        return ToolResult(f"edited {place.shown}")


class ListFiles(Tool[ListArgs]):
    name = "list_files"
    description = "List the files in this chat's workspace (or a directory of it), with sizes."
    args_model = ListArgs
    reads_files = True

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        try:
            place = place_in(ctx.data_dir, ctx.chat, args.path)
        except PathRefused as exc:
            return ToolResult.error(str(exc))
        return await in_tool_thread(ctx.chat, _listing, place, args.path)


def _listing(place: _Place, given: str) -> ToolResult:
    lines: list[str] = []
    try:
        with folder(place.root, place.parts) as fd:
            walk = Walk(fd)
            with contextlib.closing(iter(walk)) as entries:
                for entry in entries:
                    if len(lines) >= MAX_LIST_ENTRIES:
                        lines.append(f"[cut at {MAX_LIST_ENTRIES} entries]")
                        break
                    name = shown(place.parts + entry.parts)
                    lines.append(f"{name}/" if entry.is_dir else f"{name}  ({entry.size} bytes)")
            if walk.cut:
                lines.append("[a folder too large or too deep was not listed whole]")
    except (PathRefused, OSError) as exc:
        return ToolResult.error(refusal(given, exc, missing="directory"))
    return ToolResult("\n".join(lines) or ("the workspace is empty" if not place.parts else f"{given!r} is empty"))


class SearchFiles(Tool[SearchArgs]):
    name = "search_files"
    description = "Find lines matching a regular expression in the workspace's text files."
    args_model = SearchArgs
    reads_files = True

    async def run(self, args: SearchArgs, ctx: ToolContext) -> ToolResult:
        if problem := lone_surrogate("pattern", args.pattern):
            return ToolResult.error(problem)
        try:
            place = place_in(ctx.data_dir, ctx.chat, args.path)
        except PathRefused as exc:
            return ToolResult.error(str(exc))
        return await in_tool_thread(ctx.chat, _search, args.pattern, place, args.path)


def _search(pattern_text: str, place: _Place, given: str) -> ToolResult:
    """Runs in a worker thread: `regex` releases the GIL while it matches (`concurrent`) and stops at `timeout`."""
    deadline = time.monotonic() + SEARCH_SECONDS
    try:
        pattern = _compiled(pattern_text)
    except _BadPattern as exc:
        return ToolResult.error(str(exc))
    hits: list[str] = []
    searched = 0
    try:
        with contextlib.closing(_texts(place)) as texts:
            for name, data in texts:
                started = time.monotonic()
                if started >= deadline:
                    hits.append(f"[stopped after {SEARCH_SECONDS:g} s and {searched} files; search a smaller folder]")
                    break
                file_deadline = min(started + SEARCH_FILE_SECONDS, deadline)
                for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                    try:
                        found = pattern.search(line, timeout=max(file_deadline - time.monotonic(), 0.0), concurrent=True)
                    except TimeoutError:
                        if started + SEARCH_FILE_SECONDS <= deadline:  # the file had its whole allowance
                            return ToolResult.error(
                                f"the pattern took too long on {name} (over {SEARCH_FILE_SECONDS:g} s); simplify it: "
                                "nested or overlapping repeats such as (a+)+ or (a|a)* backtrack without end"
                            )
                        hits.append(f"[stopped after {SEARCH_SECONDS:g} s, inside {name}; search a smaller folder]")
                        return ToolResult("\n".join(hits))
                    if found is not None:
                        hits.append(f"{name}:{number}: {line[:300]}")
                        if len(hits) >= MAX_SEARCH_HITS:
                            return ToolResult("\n".join(hits) + f"\n[cut at {MAX_SEARCH_HITS} matches]")
                searched += 1
    except (PathRefused, OSError) as exc:
        return ToolResult.error(refusal(given, exc, missing="file or directory"))
    return ToolResult("\n".join(hits) or "no matches")


class _BadPattern(ValueError):
    pass


def _compiled(text: str) -> Any:
    """The `regex` pattern for `text`, measured before it is compiled; _BadPattern says what is wrong with it."""
    try:
        re.compile(text)  # the syntax `re` accepts, as before; cheap, it unrolls nothing
        size = _unrolled_size(_sre_parser.parse(text))
    except (re.error, RecursionError, OverflowError) as exc:
        raise _BadPattern(f"not a valid regular expression: {exc}") from exc
    if size > MAX_PATTERN_STEPS:
        raise _BadPattern(
            f"the pattern unrolls into more than {MAX_PATTERN_STEPS} steps (a counted repeat inside another, like "
            "(a{1000}){1000}); use smaller counts"
        )
    import regex  # type: ignore[import-untyped]  # loaded with the first search, not at start; no types shipped

    try:
        return regex.compile(text)
    except regex.error as exc:
        raise _BadPattern(f"not a valid regular expression: {exc}") from exc


def _unrolled_size(items: Any) -> int:
    """How many steps `regex` builds for a parsed pattern: each repeat is unrolled to its least count (at least once)."""
    total = 0
    for op, arguments in items:
        inner = sum(_unrolled_size(sub) for sub in _subpatterns(arguments))
        total += 1 + (max(arguments[0], 1) * inner if str(op) in _REPEATS else inner)
        if total > MAX_PATTERN_STEPS:  # enough to refuse; nested counts could make the exact number astronomical
            break
    return total


def _subpatterns(arguments: Any) -> Generator[Any, None, None]:
    if isinstance(arguments, _sre_parser.SubPattern):
        yield arguments
    elif isinstance(arguments, tuple | list):
        for item in arguments:
            yield from _subpatterns(item)


def _texts(place: _Place) -> Generator[tuple[str, bytes], None, None]:
    """(shown path, bytes) of each regular file a search covers, up to MAX_WRITE_BYTES each, never through a link."""
    if not place.parts:
        with folder(place.root, ()) as fd:
            yield from _texts_under(fd, ())
        return
    with folder(place.root, place.parts[:-1]) as parent:
        fd, info = open_entry(parent, place.parts[-1])
        try:
            if stat.S_ISDIR(info.st_mode):
                yield from _texts_under(fd, place.parts)
            elif info.st_size <= MAX_WRITE_BYTES:
                yield place.shown, os.pread(fd, MAX_WRITE_BYTES, 0)
        finally:
            os.close(fd)


def _texts_under(fd: int, prefix: tuple[str, ...]) -> Generator[tuple[str, bytes], None, None]:
    with contextlib.closing(iter(Walk(fd))) as entries:
        for entry in entries:
            if not entry.is_file or entry.size > MAX_WRITE_BYTES:
                continue
            try:
                file_fd, _ = open_file(entry.folder_fd, entry.parts[-1])
            except (PathRefused, OSError):  # swapped or gone since it was listed
                continue
            with os.fdopen(file_fd, "rb") as fh:
                data = fh.read(MAX_WRITE_BYTES + 1)
            if len(data) <= MAX_WRITE_BYTES:
                yield shown(prefix + entry.parts), data


class SendFileTool(Tool[SendArgs]):
    name = "send_file"
    description = (
        "Send a file from this chat's workspace to the user (a document; .png/.jpg as a photo). Inside a task "
        "it is attached to your result and delivered with it, so call it once the file is final."
    )
    args_model = SendArgs
    reads_files = True

    async def run(self, args: SendArgs, ctx: ToolContext) -> ToolResult:
        if args.caption is not None and (problem := lone_surrogate("caption", args.caption)):
            return ToolResult.error(f"not sent: {problem}")
        return await send_workspace_file(ctx, args.path, args.caption)


async def send_workspace_file(ctx: ToolContext, given: str, caption: str | None) -> ToolResult:
    """Send a file of the chat's workspace (a .png or .jpg as a photo), or attach it to a task's result: send_file's
    work, and the render tools' once their picture is saved."""
    try:
        artifact = ctx.outgoing.add(ctx.data_dir, ctx.chat, given)
    except (PathRefused, FileRefused) as exc:
        return ToolResult.error(f"not sent: {exc}")
    if ctx.hold_files:
        return ToolResult(f"attached {artifact.name} ({artifact.size} bytes); it is delivered with your result")
    result = await ctx.perform(SendFile(chat=ctx.chat, path=artifact.path, kind=artifact.kind, caption=caption))
    if not result.ok:
        return ToolResult.error(f"the chat refused {artifact.name}: {result.error or 'unknown error'}")
    if result.queued:
        return ToolResult(f"{artifact.name} is queued and will be delivered; do not send it again")
    ctx.sent_message_ids.extend(result.message_ids)
    return ToolResult(f"sent {artifact.name} ({artifact.size} bytes) as a {artifact.kind}")
