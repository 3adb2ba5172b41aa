"""The per-chat workspace directory under the data dir, where files the user sends and the assistant makes live."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bicameral.folders import safe_name
from bicameral.sandbox.beneath import create_new, folder
from bicameral.sandbox.bwrap import SANDBOX_UID
from bicameral.sandbox.paths import resolve_inside

_MAX_NUMBERED = 1000


def workspace_for(data_dir: Path, chat: str) -> Path:
    """`<data>/workspaces/<safe chat name>/`, created on first use."""
    path = data_dir / "workspaces" / safe_name(chat, "chat")
    path.mkdir(parents=True, exist_ok=True)
    return path


def sandbox_workspace(data_dir: Path, chat: str) -> Path:
    """The chat's workspace, writable by the sandbox user when we run as root (who cannot be held to a process limit)."""
    path = workspace_for(data_dir, chat)
    if os.geteuid() == 0:
        hand_to_sandbox_user(data_dir / "workspaces", path)
    return path


def hand_to_sandbox_user(root: Path, workspace: Path) -> None:
    """Chown one workspace directory (only it, never what it holds or anything else) to the sandbox user."""
    # Handing a shared directory over once broke every shell on a machine, so anything else is refused.
    real_root = root.resolve()
    if workspace.is_symlink() or not workspace.is_dir() or workspace.resolve().parent != real_root:
        raise ValueError(f"refusing to hand {workspace} to the sandbox user: not a workspace under {real_root}")
    if workspace.name != safe_name(workspace.name, "chat") or real_root.name != "workspaces":
        raise ValueError(f"refusing to hand {workspace} to the sandbox user: not a workspace under {real_root}")
    if workspace.lstat().st_uid != SANDBOX_UID:
        os.chown(workspace, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)


def add_to_workspace(data_dir: Path, chat: str, source: Path, name: str | None = None) -> Path:
    """Copy a received file into the chat's workspace (keeping its name, numbered when taken); returns the copy."""
    root = workspace_for(data_dir, chat).resolve()
    name = safe_name(name or source.name)
    stem, dot, ext = name.rpartition(".")
    if not stem:
        stem, dot, ext = name, "", ""
    with folder(root, ()) as workspace, source.open("rb") as received:
        for n in range(_MAX_NUMBERED):
            candidate = f"{stem}-{n}{dot}{ext}" if n else name
            resolve_inside(root, candidate)
            # Created anew, never opened through a name the sandbox made: a symlink planted there after the check
            # is a taken name like any other, not a way to write outside.
            try:
                fd = create_new(workspace, candidate)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as copy:
                # A copy, not a link: editing the workspace file must not change the received original.
                shutil.copyfileobj(received, copy)
            return root / candidate
    raise FileExistsError(f"{name} and {_MAX_NUMBERED - 1} numbered copies of it are already in the workspace")
