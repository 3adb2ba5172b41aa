"""The one path checker: turns a user- or model-given relative path into a file inside a workspace, or refuses."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

from bicameral.errors import BicameralError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_PATH_CHARS = 1024


class PathRefused(BicameralError):
    """A path that would leave the workspace or name something that is not a plain file or directory."""


def safe_name(name: str, fallback: str = "file") -> str:
    """One path component made of `[A-Za-z0-9._-]` only, no leading dots, at most 120 chars, never empty."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
    return cleaned[-120:] or fallback


def resolve_inside(root: Path, given: str) -> Path:
    """The path `given` names inside `root`; refuses absolute paths, `..`, control characters and symlinks out."""
    if not given or len(given) > MAX_PATH_CHARS:
        raise PathRefused(f"path must be 1 to {MAX_PATH_CHARS} characters")
    if _CONTROL.search(given):
        raise PathRefused("path contains control characters; use a plain file name")
    if "\\" in given:
        raise PathRefused("use / to separate directories, not \\")
    pure = PurePosixPath(given)
    if pure.is_absolute() or given.startswith("~"):
        raise PathRefused(f"{given!r} is absolute; give a path relative to the workspace")
    if ".." in pure.parts:
        raise PathRefused(f"{given!r} goes up with '..'; stay inside the workspace")
    root = root.resolve()
    candidate = root.joinpath(*pure.parts) if pure.parts not in ((), (".",)) else root
    # resolve() follows every symlink on the way, so a link anywhere in the path that points out is caught.
    resolved = candidate.resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise PathRefused(f"{given!r} points outside the workspace (through a symlink)")
    if resolved.exists():
        mode = os.stat(resolved).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise PathRefused(f"{given!r} is not a regular file or directory")
    return resolved
