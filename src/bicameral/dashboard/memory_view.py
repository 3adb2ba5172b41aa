"""The memory page: the remembered facts' Markdown files, listed, shown, edited and deleted; a name is looked up in
the listing (never joined to a path), so `..`, absolute names and links lead nowhere, and every write goes through
the memory store's own checks (`write_file`, `inside`, its size limit)."""

from __future__ import annotations

from pathlib import Path

from bicameral.store.memory_files import MAX_FILE_BYTES, inside, markdown_files, write_file
from bicameral.text import normalize

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


def _listed(root: Path | None, name: str) -> Path | None:
    """The file behind a listed name, when it still is a plain file inside the root (it may have changed since)."""
    if root is None or name not in memory_names(root):
        return None
    path = root / name
    return path if inside(root, path) else None


def save_memory(root: Path | None, name: str, text: str) -> str | None:
    """Replace a listed file's text as the memory tools would write it; None when saved, else why not."""
    path = _listed(root, name)
    if root is None or path is None:
        return "there is no such memory file"
    # As the store cleans what it writes: control codes and lone surrogates go, a browser's CRLF becomes LF.
    text = normalize(text, compose=False).text
    size = len(text.encode("utf-8"))
    if size > MAX_FILE_BYTES:
        return f"{size} bytes is over the {MAX_FILE_BYTES} byte limit of a memory file"
    try:
        write_file(root, path, text if text.endswith("\n") or not text else text + "\n")
    except (OSError, ValueError) as exc:
        return str(exc)
    return None


def delete_memory(root: Path | None, name: str) -> bool:
    """Delete a listed file; False when the name is not one (or no longer a plain file inside the root)."""
    path = _listed(root, name)
    if path is None:
        return False
    try:
        path.unlink()
    except OSError:
        return False
    return True
