"""Where each chat's CLI lives: its own working dir and home; token files and capture logs sit outside all of them."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Workspace:
    """One chat's private directories: the CLI's working dir, and the home that holds its config and sessions."""

    cwd: Path
    home: Path

    @property
    def config_dir(self) -> Path:
        return self.home / ".claude"


def root(data_dir: Path) -> Path:
    return data_dir / "claude_code"


def workspace(data_dir: Path, chat: str) -> Workspace:
    """The chat's directories, named by a digest so no chat id (or path trick in one) shows up in a path."""
    key = hashlib.sha256(chat.encode("utf-8")).hexdigest()[:24]
    return Workspace(cwd=root(data_dir) / "chats" / key, home=root(data_dir) / "homes" / key)


def token_dir(data_dir: Path) -> Path:
    """Where the MCP configs (each holding a worker's bearer token) go: beside the workspaces, never inside one."""
    return root(data_dir) / "mcp"



def mcp_config_path(token_dir: Path, worker: str, instance: str) -> Path:
    """A worker instance's MCP config in the token dir, named by the worker and the instance."""
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in worker)[:80]
    return token_dir / f"{slug}-{instance}.json"

def private_dir(path: Path) -> Path:
    """A directory only this user can enter."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path
