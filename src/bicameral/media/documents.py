"""`DocumentReader`: a sent document's text (PDF, Word, Excel, PowerPoint, CSV, JSON, HTML, text), read once, bounded.

Every parser runs in the web extractor's limited child processes (`web/extract.py`, `web/extract_formats.py`):
CPU, memory, wall clock, pages and characters are bounded there, and zip archives are checked before a library
opens them. Here the file's size is checked before a byte is read, its real type told from its first bytes, and
the whole text written beside its copy in the chat's workspace, where the file tools read it; the model is shown
the text itself, or a page-by-page extractive digest of it when it is long (media/digest.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from bicameral.events import Attachment
from bicameral.failures import document_too_big, failure_sentence
from bicameral.media.digest import digest
from bicameral.media.sniff import HEAD_BYTES, decode, sniff
from bicameral.sandbox.beneath import folder, open_file, replace_file
from bicameral.sandbox.paths import PathRefused, relative_parts
from bicameral.sandbox.workspace import workspace_for
from bicameral.web.extract import ExtractFailed, ExtractLimits, Extractor

log = logging.getLogger(__name__)

# The libraries the child reads documents with, by the name doctor shows.
LIBRARIES = {"pypdf": "pypdf", "python-docx": "docx", "openpyxl": "openpyxl", "python-pptx": "pptx", "trafilatura": "trafilatura"}
# What each way a reader can fail tells the person (failures.py).
_NOTES = {
    "too_long": "document_too_costly",
    "too_large": "document_too_costly",
    "too_much_text": "document_too_costly",
    "bomb": "document_bomb",
    "unsupported": "document_unsupported",
}
# Lines that are not the document's words: markers and the reader's own notes.
_NOT_TEXT = re.compile(r"^(--- (page|sheet|slide) .+ ---|\[… .*\])$", re.MULTILINE)


def _extract_limits() -> ExtractLimits:
    # Larger than a web page's: one file a message, its whole text kept on disk; one child at a time per chat.
    return ExtractLimits(
        cpu_seconds=20, wall_seconds=60.0, max_pages=500, max_chars=1_000_000, concurrent=2, per_chat=1, warm=1
    )


@dataclass(frozen=True)
class DocumentLimits:
    """What one sent document may be and cost."""

    max_bytes: int = 20 << 20  # BICAMERAL_DOCUMENT_MAX_MB: larger files are not read at all
    budget_chars: int = 12_000  # shown to the model as is up to this; beyond it, the page-by-page digest
    extract: ExtractLimits = field(default_factory=_extract_limits)


class DocumentReader:
    """Reads `document` attachments for MediaIntake; a bad, hostile or unknown file gets a note, never an exception."""

    def __init__(self, limits: DocumentLimits | None = None, *, extractor: Extractor | None = None) -> None:
        self.limits = limits or DocumentLimits()
        # No child starts (and no parser is imported) before the first document.
        self._extractor = extractor or Extractor(self.limits.extract)

    async def read(self, attachment: Attachment, *, data_dir: Path, chat: str) -> Attachment:
        """The attachment with its text (or digest) and `text_path`, or with a `note` saying why there is none."""
        copy = attachment.workspace_path
        root = workspace_for(data_dir, chat) if copy else None
        text_path = f"{copy}.txt" if copy else None
        if root is not None and text_path is not None:
            saved = await asyncio.to_thread(_saved_text, root, text_path, self.limits.extract.max_chars * 4)
            if saved is not None:  # read before (a restart reads the batch again): the text is kept
                return self._shown(attachment, saved, text_path)
        source = data_dir / attachment.path
        size, head = await asyncio.to_thread(_head, source)
        if size > self.limits.max_bytes:
            return dataclasses.replace(attachment, note=document_too_big(self.limits.max_bytes >> 20))
        kind = sniff(head, attachment.name or attachment.path, attachment.mime)
        if kind is None:
            return _noted(attachment, "document_unsupported")
        body = await asyncio.to_thread(_body, source, self.limits.max_bytes)
        if kind == "text":
            text = await asyncio.to_thread(decode, body)
            if not text.strip():
                return _noted(attachment, "document_empty")
            return self._shown(attachment, text, copy)  # its copy in the workspace is the whole text already
        try:
            text = await self._extractor.extract(kind, body, chat)
        except ExtractFailed as failed:
            log.info("document %s not read: %s", attachment.path, failed)
            return _noted(attachment, _NOTES.get(failed.reason, "unreadable_file"))
        if not _NOT_TEXT.sub("", text).strip():
            return _noted(attachment, "document_no_text_layer" if kind == "pdf-pages" else "document_empty")
        if root is not None and text_path is not None:
            text_path = await asyncio.to_thread(_save_text, root, text_path, text)
        return self._shown(attachment, text, text_path)

    async def aclose(self) -> None:
        """Stop the warm reader, at shutdown."""
        await self._extractor.aclose()

    def _shown(self, attachment: Attachment, text: str, text_path: str | None) -> Attachment:
        shown = digest(text, budget=self.limits.budget_chars, text_path=text_path)
        return dataclasses.replace(attachment, text=shown, text_path=text_path)


def missing_libraries() -> list[str]:
    """The document libraries that cannot be imported here (looked up, not imported: doctor stays light)."""
    return [name for name, module in LIBRARIES.items() if importlib.util.find_spec(module) is None]


def _noted(attachment: Attachment, kind: str) -> Attachment:
    return dataclasses.replace(attachment, note=failure_sentence(kind))


def _head(path: Path) -> tuple[int, bytes]:
    """The file's size and first bytes; the size is known before anything else is read."""
    with path.open("rb") as file:
        return os.fstat(file.fileno()).st_size, file.read(HEAD_BYTES)


def _body(path: Path, max_bytes: int) -> bytes:
    """The whole file, never more than `max_bytes` (it may have grown since its size was checked)."""
    with path.open("rb") as file:
        return file.read(max_bytes)


def _saved_text(root: Path, text_path: str, max_bytes: int) -> str | None:
    """The text written when this copy was read before, else None (a symlink or folder there is not followed).

    Only a text newer than the copy is this copy's: one left from an earlier file of the same name is written anew.
    """
    try:
        parts = relative_parts(text_path)
        with folder(root, parts[:-1]) as where:
            copy = os.stat(parts[-1].removesuffix(".txt"), dir_fd=where, follow_symlinks=False)
            fd, info = open_file(where, parts[-1])
            with os.fdopen(fd, "rb") as file:
                if info.st_mtime_ns < copy.st_mtime_ns:
                    return None
                return file.read(max_bytes).decode("utf-8", "replace")
    except (OSError, PathRefused):
        return None


def _save_text(root: Path, text_path: str, text: str) -> str | None:
    """Write the whole text beside the copy (renamed into place: a link planted there is refused); its path or None."""
    try:
        parts = relative_parts(text_path)
        with folder(root, parts[:-1]) as where:
            replace_file(where, parts[-1], text.encode("utf-8"))
        return text_path
    except (OSError, PathRefused) as exc:  # a name too long, a link or folder there, a full disk: the digest goes out
        log.warning("could not keep the text of %s in the workspace: %s", text_path, exc)
        return None
