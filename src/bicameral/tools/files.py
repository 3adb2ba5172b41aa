"""File tools confined to the chat's workspace: read, write, edit, list, search and send."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

from bicameral.events import SendFile
from bicameral.sandbox.artifacts import FileRefused
from bicameral.sandbox.paths import PathRefused, resolve_inside
from bicameral.sandbox.workspace import workspace_for
from bicameral.tools.base import Tool, ToolContext, ToolResult

# Below the registry's result cap so the note about what was cut survives.
MAX_READ_BYTES = 16_000
MAX_WRITE_BYTES = 2_000_000
MAX_LIST_ENTRIES = 500
MAX_SEARCH_HITS = 200
_PATH = "Path relative to the chat's workspace, e.g. notes/todo.txt."


class PathArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)


class ReadArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    offset: int = Field(default=0, ge=0, description="Byte to start at, to read a large file in pieces.")


class ListArgs(BaseModel):
    path: str = Field(default=".", max_length=1024, description="Directory relative to the workspace.")


class WriteArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    content: str = Field(max_length=MAX_WRITE_BYTES, description="The whole new text of the file.")


class EditArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    old: str = Field(min_length=1, description="Exact text to replace; it must occur exactly once.")
    new: str = Field(description="The replacement text.")


class SearchArgs(BaseModel):
    pattern: str = Field(min_length=1, max_length=200, description="Text to look for (a regular expression).")
    path: str = Field(default=".", max_length=1024, description="Directory to search, relative to the workspace.")


class SendArgs(BaseModel):
    path: str = Field(max_length=1024, description=_PATH)
    caption: str | None = Field(default=None, max_length=1000, description="One short line shown with the file.")


def _locate(ctx: ToolContext, given: str) -> Path:
    return resolve_inside(workspace_for(ctx.data_dir, ctx.chat), given)


def _write(path: Path, data: bytes, *, create: bool) -> None:
    """Replace the file's bytes; O_NOFOLLOW: a symlink swapped in after the path check is refused, not followed."""
    flags = os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _shown(ctx: ToolContext, path: Path) -> str:
    return path.relative_to(workspace_for(ctx.data_dir, ctx.chat).resolve()).as_posix() or "."


class ReadFile(Tool[ReadArgs]):
    name = "read_file"
    description = f"Read a text file from this chat's workspace, {MAX_READ_BYTES} bytes at a time (offset for more)."
    args_model = ReadArgs
    reads_files = True

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        try:
            path = _locate(ctx, args.path)
        except PathRefused as exc:
            return ToolResult.error(str(exc))
        if not path.is_file():
            return ToolResult.error(f"no file {args.path!r} in the workspace")
        size = path.stat().st_size
        with path.open("rb") as fh:
            fh.seek(args.offset)
            data = fh.read(MAX_READ_BYTES)
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
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            return ToolResult.error(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
        try:
            path = _locate(ctx, args.path)
            if path.is_dir():
                return ToolResult.error(f"{args.path!r} is a directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            _locate(ctx, args.path)  # the parents just made may not change the answer, but check again
        except PathRefused as exc:
            return ToolResult.error(str(exc))
        _write(path, data, create=True)
        return ToolResult(f"wrote {len(data)} bytes to {_shown(ctx, path)}")


class EditFile(Tool[EditArgs]):
    name = "edit_file"
    description = "Replace one exact piece of text in a workspace file (it must occur exactly once)."
    args_model = EditArgs
    reads_files = True

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        try:
            path = _locate(ctx, args.path)
        except PathRefused as exc:
            return ToolResult.error(str(exc))
        if not path.is_file():
            return ToolResult.error(f"no file {args.path!r} in the workspace")
        if path.stat().st_size > MAX_WRITE_BYTES:
            return ToolResult.error(f"{args.path!r} is larger than {MAX_WRITE_BYTES} bytes; edit it with run instead")
        text = path.read_text(encoding="utf-8", errors="replace")
        count = text.count(args.old)
        if count != 1:
            return ToolResult.error(f"the text to replace occurs {count} times in {args.path!r}; it must occur exactly once")
        updated = text.replace(args.old, args.new).encode("utf-8")
        if len(updated) > MAX_WRITE_BYTES:
            return ToolResult.error(f"the edited file would be {len(updated)} bytes; the limit is {MAX_WRITE_BYTES}")
        _write(path, updated, create=False)
        return ToolResult(f"edited {_shown(ctx, path)}")


class ListFiles(Tool[ListArgs]):
    name = "list_files"
    description = "List the files in this chat's workspace (or a directory of it), with sizes."
    args_model = ListArgs
    reads_files = True

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        try:
            root = _locate(ctx, args.path)
        except PathRefused as exc:
            return ToolResult.error(str(exc))
        if not root.is_dir():
            return ToolResult.error(f"no directory {args.path!r} in the workspace")
        lines: list[str] = []
        for path in sorted(root.rglob("*")):
            if len(lines) >= MAX_LIST_ENTRIES:
                lines.append(f"[cut at {MAX_LIST_ENTRIES} entries]")
                break
            if path.is_symlink():
                continue
            shown = _shown(ctx, path)
            lines.append(f"{shown}/" if path.is_dir() else f"{shown}  ({path.stat().st_size} bytes)")
        return ToolResult("\n".join(lines) or "the workspace is empty")


class SearchFiles(Tool[SearchArgs]):
    name = "search_files"
    description = "Find lines matching a regular expression in the workspace's text files."
    args_model = SearchArgs
    reads_files = True

    async def run(self, args: SearchArgs, ctx: ToolContext) -> ToolResult:
        try:
            pattern = re.compile(args.pattern)
        except re.error as exc:
            return ToolResult.error(f"not a valid regular expression: {exc}")
        try:
            root = _locate(ctx, args.path)
        except PathRefused as exc:
            return ToolResult.error(str(exc))
        hits: list[str] = []
        for path in sorted(root.rglob("*") if root.is_dir() else [root]):
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_WRITE_BYTES:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if pattern.search(line):
                    hits.append(f"{_shown(ctx, path)}:{number}: {line[:300]}")
                    if len(hits) >= MAX_SEARCH_HITS:
                        return ToolResult("\n".join(hits) + f"\n[cut at {MAX_SEARCH_HITS} matches]")
        return ToolResult("\n".join(hits) or "no matches")


class SendFileTool(Tool[SendArgs]):
    name = "send_file"
    description = (
        "Send a file from this chat's workspace to the user (a document; .png/.jpg as a photo). Inside a task "
        "it is attached to your result and delivered with it, so call it once the file is final."
    )
    args_model = SendArgs
    reads_files = True

    async def run(self, args: SendArgs, ctx: ToolContext) -> ToolResult:
        try:
            artifact = ctx.outgoing.add(ctx.data_dir, ctx.chat, args.path)
        except (PathRefused, FileRefused) as exc:
            return ToolResult.error(f"not sent: {exc}")
        if ctx.hold_files:
            return ToolResult(f"attached {artifact.name} ({artifact.size} bytes); it is delivered with your result")
        action = SendFile(chat=ctx.chat, path=artifact.path, kind=artifact.kind, caption=args.caption)
        result = await ctx.perform(action)
        if not result.ok:
            return ToolResult.error(f"the chat refused {artifact.name}: {result.error or 'unknown error'}")
        if result.queued:
            return ToolResult(f"{artifact.name} is queued and will be delivered; do not send it again")
        ctx.sent_message_ids.extend(result.message_ids)
        return ToolResult(f"sent {artifact.name} ({artifact.size} bytes) as a {artifact.kind}")
