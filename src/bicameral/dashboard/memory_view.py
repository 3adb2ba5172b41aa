"""The memory page: the remembered facts' Markdown files, listed and shown read-only; a name is looked up in the
listing (never joined to a path), so `..`, absolute names and links lead nowhere."""

from __future__ import annotations

from pathlib import Path

from bicameral.store.memory_files import markdown_files

MAX_SHOWN_BYTES = 1 << 20


def memory_names(root: Path | None) -> list[str]:
    return [] if root is None else [found.rel for found in markdown_files(root)]


def memory_text(root: Path | None, name: str) -> str | None:
    """The file's text when `name` is one the listing shows, else None."""
    if root is None or name not in memory_names(root):
        return None
    path = root / name  # a name from the listing: a plain file under the root, no link on the way
    with path.open("rb") as handle:
        data = handle.read(MAX_SHOWN_BYTES + 1)
    text = data[:MAX_SHOWN_BYTES].decode("utf-8", "replace")
    return text + ("\n…(cut: the file is larger than 1 MB)" if len(data) > MAX_SHOWN_BYTES else "")
