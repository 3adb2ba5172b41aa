"""What the extraction child reads besides web pages: PDF page by page, Word, Excel, PowerPoint, CSV, JSON, HTML files.

Runs only in the child (`extract_worker`), under its limits, and is imported there on the first such document. Each
reader gives plain text with markers a reader (and the digest in `media/digest.py`) can find: `--- page N ---`,
`--- sheet NAME ---`, `--- slide N ---`. Word, Excel and PowerPoint files are zip archives: the archive's own
directory is checked (entries, unpacked size, ratio) before any library opens it, so a zip bomb is refused unread.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# The kinds read here (the worker reads `pdf` and `html` itself).
KINDS = ("pdf-pages", "html-doc", "office", "csv", "json")


class Refused(Exception):
    """A check said no before a parser ran; `refusal` is the child's answer status (`bomb` or `unsupported`)."""

    def __init__(self, refusal: str, why: str) -> None:
        super().__init__(why)
        self.refusal = refusal


@dataclass(frozen=True)
class Caps:
    """How much of a document is turned into text (the rest is named in a note line), and what an archive may hold."""

    max_pages: int
    max_chars: int
    rows: int = 2000  # per sheet (and per CSV)
    cols: int = 50
    sheets: int = 100
    zip_entries: int = 5000
    zip_bytes: int = 256 << 20  # unpacked, all entries together
    zip_ratio: int = 100  # unpacked to packed, over the whole archive (real Office files stay well under 30)


def read(kind: str, data: bytes, caps: Caps) -> str:
    """The text of one document of `kind` (one of KINDS)."""
    readers: dict[str, Callable[[bytes, Caps], str]] = {
        "pdf-pages": pdf_pages,
        "html-doc": html_document,
        "office": office,
        "csv": csv_rows,
        "json": json_text,
    }
    return readers[kind](data, caps)


class _Text:
    """Lines gathered up to a character budget; past it, one line says the rest was left out."""

    def __init__(self, max_chars: int) -> None:
        self.lines: list[str] = []
        self.left = max(max_chars - 200, 0)  # room for the closing note
        self.full = False

    def add(self, line: str) -> bool:
        """Keep `line`; False once the budget is spent (and every later line is dropped)."""
        if self.full:
            return False
        if len(line) + 1 > self.left:
            self.full = True
            self.lines.append("[… the rest is beyond the text limit]")
            return False
        self.lines.append(line)
        self.left -= len(line) + 1
        return True

    def text(self) -> str:
        return "\n".join(self.lines)


def pdf_pages(data: bytes, caps: Caps) -> str:
    """Each page's text under `--- page N ---` (an empty page keeps its marker: a scan shows as markers only)."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    count = len(reader.pages)
    out = _Text(caps.max_chars)
    for number in range(min(count, caps.max_pages)):
        body = (reader.pages[number].extract_text() or "").strip()
        if not (out.add(f"--- page {number + 1} ---") and (not body or out.add(body))):
            return out.text()
    if count > caps.max_pages:
        out.add(f"[… {count - caps.max_pages} more pages not read]")
    return out.text()


def html_document(data: bytes, caps: Caps) -> str:
    """An HTML file's main text as Markdown (trafilatura, favouring recall), else all its text."""
    import trafilatura

    found = trafilatura.extract(data, output_format="markdown", include_comments=False, favor_recall=True)
    return found or trafilatura.html2txt(data)


def office(data: bytes, caps: Caps) -> str:
    """A Word, Excel or PowerPoint file, told apart by what the archive holds (never by the file's name)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(_checked(archive, caps))
    if "word/document.xml" in names:
        return docx_text(data, caps)
    if "xl/workbook.xml" in names:
        return xlsx_text(data, caps)
    if "ppt/presentation.xml" in names:
        return pptx_text(data, caps)
    raise Refused("unsupported", "a zip archive that is not a Word, Excel or PowerPoint file")


def _checked(archive: zipfile.ZipFile, caps: Caps) -> list[str]:
    """The archive's entry names, once its directory shows nothing that unpacks beyond the caps."""
    infos = archive.infolist()
    if len(infos) > caps.zip_entries:
        raise Refused("bomb", f"{len(infos)} entries (at most {caps.zip_entries})")
    unpacked = sum(info.file_size for info in infos)
    packed = sum(info.compress_size for info in infos)
    if unpacked > caps.zip_bytes:
        raise Refused("bomb", f"unpacks to {unpacked:,} bytes (at most {caps.zip_bytes:,})")
    # zipfile stops each entry at its declared size, so a directory that lies about sizes cannot get past this.
    if unpacked > 1 << 20 and unpacked > caps.zip_ratio * max(packed, 1):
        raise Refused("bomb", f"unpacks {unpacked // max(packed, 1)} times its packed size")
    return [info.filename for info in infos]


def docx_text(data: bytes, caps: Caps) -> str:
    """Paragraphs (headings as Markdown `#`) and tables (cells joined by ` | `) in document order."""
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    out = _Text(caps.max_chars)
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            lines = [" | ".join(cell.text.strip() for cell in row.cells[: caps.cols]) for row in block.rows[: caps.rows]]
        else:
            style = block.style.name if block.style is not None else ""
            level = style.removeprefix("Heading ").strip() if style and style.startswith("Heading ") else ""
            lines = [("#" * int(level) + " " if level.isdigit() else "") + block.text] if block.text.strip() else []
        if not all(out.add(line) for line in lines):
            break
    return out.text()


def xlsx_text(data: bytes, caps: Caps) -> str:
    """Each sheet under `--- sheet NAME ---`, its rows as tab-separated lines, capped in rows and columns."""
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        out = _Text(caps.max_chars)
        for sheet in book.worksheets[: caps.sheets]:
            if not (out.add(f"--- sheet {sheet.title} ---") and _table(out, sheet.iter_rows(values_only=True), caps)):
                break
        if len(book.worksheets) > caps.sheets:
            out.add(f"[… {len(book.worksheets) - caps.sheets} more sheets]")
        return out.text()
    finally:
        book.close()


def _table(out: _Text, rows: Iterable[Iterable[Any]], caps: Caps) -> bool:
    """Rows as tab-separated lines (empty ones skipped) up to the caps; False once the text budget is spent."""
    shown, wide = 0, False
    for row in rows:
        cells = ["" if value is None else str(value).replace("\t", " ").replace("\n", " ") for value in row]
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        if shown == caps.rows:
            return out.add("[… more rows]")
        wide |= len(cells) > caps.cols
        if not out.add("\t".join(cells[: caps.cols])):
            return False
        shown += 1
    return out.add("[… more columns]") if wide else True


def pptx_text(data: bytes, caps: Caps) -> str:
    """Each slide under `--- slide N ---`: its text boxes, tables and speaker notes."""
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    out = _Text(caps.max_chars)
    slides = list(deck.slides)
    for number, slide in enumerate(slides[: caps.max_pages], start=1):
        lines = [f"--- slide {number} ---", *_shape_lines(slide.shapes, caps)]
        if slide.has_notes_slide and (notes := slide.notes_slide.notes_text_frame):
            lines += [f"Notes: {notes.text}"] if notes.text.strip() else []
        if not all(out.add(line) for line in lines):
            return out.text()
    if len(slides) > caps.max_pages:
        out.add(f"[… {len(slides) - caps.max_pages} more slides not read]")
    return out.text()


def _shape_lines(shapes: Iterable[Any], caps: Caps) -> Iterator[str]:
    for shape in shapes:
        if getattr(shape, "shapes", None) is not None:  # a group: its members, in order
            yield from _shape_lines(shape.shapes, caps)
        elif getattr(shape, "has_table", False) and shape.has_table:
            for row in list(shape.table.rows)[: caps.rows]:
                yield " | ".join(cell.text.strip() for cell in list(row.cells)[: caps.cols])
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame and shape.text_frame.text.strip():
            yield shape.text_frame.text


def csv_rows(data: bytes, caps: Caps) -> str:
    """A CSV (or TSV, `;`- or `|`-separated) file's rows as tab-separated lines, capped like a sheet."""
    text = data.decode("utf-8-sig", errors="replace")
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    out = _Text(caps.max_chars)
    _table(out, csv.reader(io.StringIO(text, newline=""), dialect), caps)
    return out.text()


def json_text(data: bytes, caps: Caps) -> str:
    """A JSON file indented for reading; one that does not parse (JSON Lines, too deep) as it is."""
    text = data.decode("utf-8-sig", errors="replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)[: caps.max_chars]
    except (ValueError, RecursionError):
        return text[: caps.max_chars]
