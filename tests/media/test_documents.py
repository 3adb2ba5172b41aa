"""Each kind of document people send is read to text with its markers, by what it is, not by what its name says."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bicameral.failures import failure_sentence
from bicameral.media.documents import DocumentReader
from bicameral.sandbox.workspace import workspace_for
from tests.media.files import CHAT, docx_bytes, plain_zip, pptx_bytes, sent, xlsx_bytes
from tests.web.hostile import drawing_only_pdf, pdf, text_page


async def read(data_dir: Path, name: str, body: bytes, reader: DocumentReader | None = None):
    return await (reader or DocumentReader()).read(sent(data_dir, name, body), data_dir=data_dir, chat=CHAT)


def whole(data_dir: Path, text_path: str) -> str:
    return (workspace_for(data_dir, CHAT) / text_path).read_text(encoding="utf-8")


async def test_a_pdf_is_read_page_by_page_and_its_whole_text_kept_beside_the_copy(tmp_path: Path) -> None:
    done = await read(tmp_path, "report.pdf", pdf([text_page("Revenue grew nine percent"), text_page("Costs fell")]))
    assert done.note is None
    assert done.text == "--- page 1 ---\nRevenue grew nine percent\n--- page 2 ---\nCosts fell"
    assert done.text_path == "report.pdf.txt" and whole(tmp_path, done.text_path) == done.text


async def test_a_word_file_keeps_its_headings_paragraphs_and_tables(tmp_path: Path) -> None:
    body = docx_bytes("Dear Ann,", "the lease ends in May.", heading="Lease", table=[["room", "rent"], ["attic", "400"]])
    done = await read(tmp_path, "lease.docx", body)
    assert done.text == "# Lease\nDear Ann,\nthe lease ends in May.\nroom | rent\nattic | 400"
    assert whole(tmp_path, "lease.docx.txt") == done.text


async def test_a_spreadsheet_is_read_sheet_by_sheet_with_capped_rows(tmp_path: Path) -> None:
    many = [["n", "square"], *[[n, n * n] for n in range(2500)]]
    body = xlsx_bytes({"Budget": [["item", "cost"], ["milk", 2], [None, None], ["eggs", 3.5]], "Squares": many})
    done = await read(tmp_path, "budget.xlsx", body)
    text = whole(tmp_path, "budget.xlsx.txt")
    assert text.startswith("--- sheet Budget ---\nitem\tcost\nmilk\t2\neggs\t3.5\n--- sheet Squares ---\nn\tsquare\n0\t0\n")
    assert text.endswith("1998\t3992004\n[… more rows]")  # 2000 rows a sheet, the header one of them
    assert "--- sheet Squares ---" in (done.text or "")


async def test_a_presentation_is_read_slide_by_slide_with_its_notes(tmp_path: Path) -> None:
    body = pptx_bytes(("Plan", "ship in June"), ("Risks", "the supplier"), notes="say it slowly")
    done = await read(tmp_path, "plan.pptx", body)
    assert done.text == (
        "--- slide 1 ---\nPlan\nship in June\nNotes: say it slowly\n--- slide 2 ---\nRisks\nthe supplier\nNotes: say it slowly"
    )


async def test_csv_json_html_and_source_files_are_read_as_what_they_hold(tmp_path: Path) -> None:
    reader = DocumentReader()
    table = await read(tmp_path, "groceries.csv", b'name,qty\nmilk,2\n"eggs, brown",12\n', reader)
    assert table.text == "name\tqty\nmilk\t2\neggs, brown\t12" and table.text_path == "groceries.csv.txt"
    data = await read(tmp_path, "data.json", json.dumps({"city": "Oslo", "days": [1, 2]}).encode(), reader)
    assert data.text == '{\n  "city": "Oslo",\n  "days": [\n    1,\n    2\n  ]\n}'
    page = b"<html><head><title>t</title></head><body><nav>Home</nav><article><h1>Menu</h1>"
    page += b"<p>Soup of the day is tomato, served with bread from the bakery next door.</p></article></body></html>"
    html = await read(tmp_path, "menu.html", page, reader)
    assert "Soup of the day is tomato" in (html.text or "") and "<p>" not in (html.text or "")
    source = await read(tmp_path, "tool.py", b"def add(a, b):\n    return a + b\n", reader)
    assert source.text == "def add(a, b):\n    return a + b\n"
    assert source.text_path == "tool.py"  # the copy itself is the whole text
    notes = await read(tmp_path, "notes.md", "# Trip\n- café at nine\n".encode(), reader)
    assert notes.text == "# Trip\n- café at nine\n"


async def test_a_file_whose_name_lies_is_read_as_what_it_is(tmp_path: Path) -> None:
    reader = DocumentReader()
    letter = await read(tmp_path, "scan.pdf", docx_bytes("Actually a Word letter"), reader)
    assert letter.text == "Actually a Word letter" and letter.note is None
    noise = await read(tmp_path, "figures.xlsx", bytes(range(256)) * 64, reader)
    assert noise.text is None and noise.note == failure_sentence("document_unsupported")
    report = await read(tmp_path, "report.txt", pdf([text_page("a PDF after all")]), reader)
    assert report.text == "--- page 1 ---\na PDF after all"


async def test_a_scanned_pdf_is_said_to_have_no_text_layer(tmp_path: Path) -> None:
    done = await read(tmp_path, "scan.pdf", drawing_only_pdf())
    assert done.text is None and done.text_path is None
    assert done.note == failure_sentence("document_no_text_layer") and "photos" in done.note
    assert not (workspace_for(tmp_path, CHAT) / "scan.pdf.txt").exists()


async def test_archives_images_and_broken_files_get_a_note(tmp_path: Path) -> None:
    reader = DocumentReader()
    archive = await read(tmp_path, "photos.zip", plain_zip(**{"a.txt": b"hello"}), reader)
    assert archive.note == failure_sentence("document_unsupported")
    image = await read(tmp_path, "chart.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), reader)
    assert image.note == failure_sentence("document_unsupported")
    broken = await read(tmp_path, "broken.docx", plain_zip(**{"word/document.xml": b"<not xml"}), reader)
    assert broken.note == failure_sentence("unreadable_file") and broken.text is None
    cut = await read(tmp_path, "cut.pdf", pdf([text_page("whole")])[:60], reader)
    assert cut.note in (failure_sentence("unreadable_file"), failure_sentence("document_no_text_layer"))
    empty = await read(tmp_path, "empty.txt", b"  \n", reader)
    assert empty.note == failure_sentence("document_empty")


async def test_a_document_read_again_after_a_restart_reuses_its_text(tmp_path: Path) -> None:
    attachment = sent(tmp_path, "report.pdf", pdf([text_page("first reading")]))
    first = await DocumentReader().read(attachment, data_dir=tmp_path, chat=CHAT)
    (tmp_path / attachment.path).unlink()  # nothing is parsed again: the kept text is what is shown
    again = await DocumentReader().read(attachment, data_dir=tmp_path, chat=CHAT)
    assert again == first and again.text == "--- page 1 ---\nfirst reading"


async def test_a_text_left_from_an_earlier_file_of_the_same_name_is_not_reused(tmp_path: Path) -> None:
    old = sent(tmp_path, "report.pdf", pdf([text_page("last year")]))
    await DocumentReader().read(old, data_dir=tmp_path, chat=CHAT)
    workspace = workspace_for(tmp_path, CHAT)
    (workspace / "report.pdf").unlink()  # the copy deleted, its text left behind
    stale = workspace / "report.pdf.txt"
    os.utime(stale, ns=(0, 0))
    new = sent(tmp_path, "report.pdf", pdf([text_page("this year")]))
    done = await DocumentReader().read(new, data_dir=tmp_path, chat=CHAT)
    assert done.text == "--- page 1 ---\nthis year" and stale.read_text() == done.text
