"""The one path checker: turns a user- or model-given relative path into a file inside a workspace, or refuses."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

from bicameral.errors import BicameralError
from bicameral.folders import resolve_under

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255  # NAME_MAX: a longer file or folder name fails in the kernel, not here


class PathRefused(BicameralError):
    """A path that would leave the workspace or name something that is not a plain file or directory."""


def lone_surrogate(field: str, text: str) -> str | None:
    """Why `text` cannot be encoded as UTF-8 (a lone surrogate, which no file name or file holds), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"{field} contains a lone surrogate ({text[exc.start]!r} at character {exc.start}), which is not valid "
            "Unicode; leave it out or write the character it stands for"
        )
    return None


def relative_parts(given: str) -> tuple[str, ...]:
    """The components of a relative path (`()` for the workspace itself); refuses anything that could climb out."""
    if not given or len(given) > MAX_PATH_CHARS:
        raise PathRefused(f"path must be 1 to {MAX_PATH_CHARS} characters")
    if _CONTROL.search(given):
        raise PathRefused("path contains control characters; use a plain file name")
    if problem := lone_surrogate("path", given):
        raise PathRefused(problem)
    if "\\" in given:
        raise PathRefused("use / to separate directories, not \\")
    pure = PurePosixPath(given)
    if pure.is_absolute() or given.startswith("~"):
        raise PathRefused(f"{given!r} is absolute; give a path relative to the workspace")
    if ".." in pure.parts:
        raise PathRefused(f"{given!r} goes up with '..'; stay inside the workspace")
    for part in pure.parts:
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise PathRefused(f"a name in {given[:80]!r}… is longer than {MAX_NAME_BYTES} bytes; use a shorter one")
    return pure.parts


def resolve_inside(root: Path, given: str) -> Path:
    """The path `given` names inside `root`; refuses absolute paths, `..`, control characters and symlinks out.

    This looks at names only: by the time a file is opened a folder on the way may have become a symlink, so
    every open goes through `sandbox.beneath`, which never follows one.
    """
    parts = relative_parts(given)
    root = root.resolve()
    candidate = root.joinpath(*parts)
    try:
        # Every symlink on the way is followed, so a link anywhere in the path that points out is caught.
        resolved = resolve_under(root, candidate)
    except RuntimeError as exc:  # pathlib's word for ELOOP
        raise PathRefused(f"{given!r} goes through a symlink loop") from exc
    except OSError as exc:
        raise PathRefused(f"{given!r} cannot be looked up ({exc.strerror})") from exc
    if resolved is None:
        raise PathRefused(f"{given!r} points outside the workspace (through a symlink)")
    try:
        mode = os.stat(resolved).st_mode
    except (FileNotFoundError, NotADirectoryError):  # not there (yet): what opens it says which part is missing
        return resolved
    except OSError as exc:
        raise PathRefused(f"{given!r} cannot be looked up ({exc.strerror})") from exc
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise PathRefused(f"{given!r} is not a regular file or directory")
    return resolved
