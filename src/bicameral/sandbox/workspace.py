"""The per-chat workspace directory under the data dir, where files the user sends and the assistant makes live."""

from __future__ import annotations

import shutil
from pathlib import Path

from bicameral.sandbox.paths import resolve_inside, safe_name


def workspace_for(data_dir: Path, chat: str) -> Path:
    """`<data>/workspaces/<safe chat name>/`, created on first use."""
    path = data_dir / "workspaces" / safe_name(chat, "chat")
    path.mkdir(parents=True, exist_ok=True)
    return path


def add_to_workspace(data_dir: Path, chat: str, source: Path, name: str | None = None) -> Path:
    """Copy a received file into the chat's workspace (keeping its name, numbered when taken); returns the copy."""
    root = workspace_for(data_dir, chat)
    name = safe_name(name or source.name)
    stem, dot, ext = name.rpartition(".")
    if not stem:
        stem, dot, ext = name, "", ""
    dest = resolve_inside(root, name)
    n = 1
    while dest.exists():
        dest = resolve_inside(root, f"{stem}-{n}{dot}{ext}")
        n += 1
    # A copy, not a link: editing the workspace file must not change the received original.
    shutil.copyfile(source, dest)
    return dest
