"""What a sent file really is, from its first bytes: a PDF, an Office zip, text of some kind, or something unreadable."""

from __future__ import annotations

import codecs
from typing import Literal

# How a document is read: in the extraction child (the first five, extract_worker's kinds) or as text, or not at all.
DocumentKind = Literal["pdf-pages", "office", "html-doc", "csv", "json", "text"]

HEAD_BYTES = 8192  # what is looked at; text is told from binary by it too

_PDF = b"%PDF-"
_ZIP = (b"PK\x03\x04",)  # a zip archive that starts with an entry (an empty zip cannot be a document)
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_CSV = (".csv", ".tsv")
_JSON = (".json", ".geojson", ".ipynb")
_HTML = (".html", ".htm", ".xhtml")


def sniff(head: bytes, name: str, mime: str | None) -> DocumentKind | None:
    """The kind to read a file as, from its content; None when it is none we read (an image, an archive, random bytes).

    The binary formats are told by their magic bytes only: a `.pdf` that is a Word file is read as Word, an `.xlsx`
    of random bytes is refused. Among text files, which are all readable as they are, the name and the declared
    type choose the nicer reading (a table for CSV, indented JSON, HTML's main text).
    """
    if _PDF in head[:1024]:  # the spec allows junk before the header, readers look in the first kilobyte
        return "pdf-pages"
    if head.startswith(_ZIP):
        return "office"  # the child tells Word, Excel and PowerPoint apart by the archive's entries
    if not is_text(head):
        return None
    if head.startswith(_BOMS[1:]):
        return "text"  # UTF-16: read as text here (the child's readers take UTF-8)
    lower, declared = name.lower(), (mime or "").lower()
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")) or (lower.endswith(_HTML) and start.startswith(b"<")):
        return "html-doc"
    if (lower.endswith(_JSON) or declared == "application/json") and start[:1] in (b"{", b"["):
        return "json"
    if lower.endswith(_CSV) or declared in ("text/csv", "text/tab-separated-values"):
        return "csv"
    return "text"


def is_text(head: bytes) -> bool:
    """Whether these first bytes are text: UTF-8 (or UTF-16 with its mark), or a one-byte charset without controls."""
    if head.startswith(_BOMS[1:]):
        return True
    if b"\x00" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a character cut at the end is fine
        return True
    except UnicodeDecodeError:
        pass
    # Latin-1 or cp1252 text: printable bytes, tabs and line ends only.
    controls = sum(1 for byte in head if byte < 32 and byte not in (9, 10, 12, 13))
    return controls == 0


def decode(data: bytes) -> str:
    """A text file's characters: by its byte-order mark, else UTF-8, else cp1252 (what old Windows files are)."""
    if data.startswith(_BOMS[1:]):
        return data.decode("utf-16", errors="replace")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")
