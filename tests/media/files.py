"""Documents made by the tests with the libraries that write them, and a sent file as the gate leaves it."""

from __future__ import annotations

import functools
import io
import zipfile
from pathlib import Path

from bicameral.events import Attachment
from bicameral.sandbox.workspace import add_to_workspace

CHAT = "telegram:1001"


def sent(data_dir: Path, name: str, body: bytes | None = None, *, size: int | None = None) -> Attachment:
    """A document as the gate leaves it: saved under data/attachments, copied into the chat's workspace.

    `size` instead of `body`: a sparse file of that many bytes (nothing of it is written to the disk).
    """
    saved = data_dir / "attachments" / "1001" / name
    saved.parent.mkdir(parents=True, exist_ok=True)
    if body is not None:
        saved.write_bytes(body)
        copy = add_to_workspace(data_dir, CHAT, saved, name).name
    else:
        with saved.open("wb") as file:
            file.truncate(size)
        copy = None  # a copy would write it all; the gate's copy of a file this large is not what is tested
    return Attachment("document", saved.relative_to(data_dir).as_posix(), name=name, workspace_path=copy)


def docx_bytes(*paragraphs: str, table: list[list[str]] | None = None, heading: str | None = None) -> bytes:
    import docx

    document = docx.Document()
    if heading:
        document.add_heading(heading, 1)
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx_bytes(sheets: dict[str, list[list[object]]]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pptx_bytes(*slides: tuple[str, str], notes: str | None = None) -> bytes:
    from pptx import Presentation

    deck = Presentation()
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


@functools.cache
def zip_bomb_docx(zeros: int) -> bytes:
    """A real Word file with one more entry: `zeros` bytes of zeros, written in chunks (it stays a few hundred KB)."""
    out = io.BytesIO(docx_bytes("an innocent letter"))
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("word/media/padding.bin", "w", force_zip64=True) as entry:
            block = bytes(1 << 20)
            for _ in range(zeros >> 20):
                entry.write(block)
    return out.getvalue()


def plain_zip(**entries: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in entries.items():
            archive.writestr(name, body)
    return out.getvalue()
