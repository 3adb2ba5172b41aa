"""Names and places on disk: one safe file name made of any text, and whether a path really is inside a folder."""

from __future__ import annotations

import re
from pathlib import Path

MAX_NAME_CHARS = 80
_SEPARATORS = re.compile(r"[\\/]")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(name: str, fallback: str = "file") -> str:
    """One path component made of any text: its last part (after any `/` or `\\`), `[A-Za-z0-9._-]` only, no
    leading dots, at most MAX_NAME_CHARS characters (a short extension kept); `fallback` when nothing is left."""
    cleaned = _UNSAFE.sub("_", _SEPARATORS.split(name)[-1]).lstrip(".")
    if len(cleaned) > MAX_NAME_CHARS:
        stem, dot, ext = cleaned.rpartition(".")
        # Keep a short extension so the truncated file still opens with the right program.
        if dot and stem and len(ext) <= 10:
            cleaned = stem[: MAX_NAME_CHARS - len(ext) - 1] + "." + ext
        else:
            cleaned = cleaned[:MAX_NAME_CHARS]
    return cleaned or fallback


def resolve_under(root: Path, path: Path) -> Path | None:
    """Where `path` really is, every symlink on the way followed, if that is `root` itself or inside it; else None.

    A relative `path` is taken from the working directory, as `Path.resolve` takes it: join it to `root` first.
    A symlink loop raises RuntimeError and an unreadable folder OSError, for the caller to word.
    """
    real = path.resolve()
    return real if real.is_relative_to(root.resolve()) else None
