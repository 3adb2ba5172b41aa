"""A long document is shown page by page within the budget, never cut blindly, and says where the whole text is."""

from __future__ import annotations

from pathlib import Path

from bicameral.media.digest import digest
from bicameral.media.documents import DocumentReader
from tests.media.files import CHAT, sent
from tests.web.hostile import pdf, text_page


def _pages(count: int, lines: int = 40) -> str:
    return "\n".join(
        f"--- page {n} ---\n" + "\n".join(f"page {n} line {i} of the annual report" for i in range(lines))
        for n in range(1, count + 1)
    )


def test_short_text_is_shown_whole() -> None:
    assert digest("--- page 1 ---\nhello", budget=100, text_path="a.pdf.txt") == "--- page 1 ---\nhello"


def test_every_page_keeps_its_marker_and_first_lines_within_the_budget() -> None:
    text = _pages(10)
    shown = digest(text, budget=12_000, text_path="report.pdf.txt")
    assert len(shown) <= 12_000 + 400  # the closing line is on top of the budget
    for n in range(1, 11):
        assert f"--- page {n} ---\npage {n} line 0 of the annual report\npage {n} line 1" in shown
    assert "page 1 line 39" not in shown  # each page's share is its opening lines only
    assert shown.endswith(
        f"[An extractive digest, not the whole text: the opening lines of each part. The whole text (10 pages, "
        f"{len(text):,} characters) is in the workspace at report.pdf.txt: read it there.]"
    )


def test_more_pages_than_fit_are_counted_and_the_rest_named() -> None:
    shown = digest(_pages(200, lines=5), budget=3000, text_path="big.pdf.txt")
    assert "--- page 1 ---" in shown and "--- page 20 ---" in shown and "--- page 21 ---" not in shown
    assert "(the first 20 of them)" in shown and "200 pages" in shown


def test_text_without_markers_is_shown_in_blocks_of_lines_and_sheets_by_sheet() -> None:
    plain = "\n".join(f"line {i} of the novel" for i in range(5000))
    shown = digest(plain, budget=8000, text_path="novel.txt")
    assert "--- lines 1-250 ---\nline 0 of the novel" in shown and "--- lines 4751-5000 ---\nline 4750" in shown
    assert "5,000 lines" in shown and "novel.txt" in shown
    sheets = "\n".join(f"--- sheet S{n} ---\n" + "\n".join(f"{r}\t{r * n}" for r in range(2000)) for n in range(3))
    shown = digest(sheets, budget=3000, text_path="book.xlsx.txt")
    assert "--- sheet S0 ---\n0\t0\n1\t0" in shown and "--- sheet S2 ---\n0\t0\n1\t2" in shown and "3 sheets" in shown


def test_one_endless_line_is_cut_inside_its_share() -> None:
    shown = digest("--- page 1 ---\n" + "x" * 50_000 + "\n--- page 2 ---\nend", budget=2000, text_path=None)
    assert shown.startswith("--- page 1 ---\nxxx") and "--- page 2 ---\nend" in shown
    assert "could not be saved; this digest is all there is" in shown and len(shown) < 2400


async def test_a_long_pdf_reaches_the_model_as_a_digest_and_the_file_tools_as_a_whole(tmp_path: Path) -> None:
    body = pdf([text_page(f"Chapter {n} opens here" + " and goes on" * 20) for n in range(1, 61)])  # 16,000 chars
    reader = DocumentReader()
    done = await reader.read(sent(tmp_path, "book.pdf", body), data_dir=tmp_path, chat=CHAT)
    assert done.text_path == "book.pdf.txt" and done.text is not None
    assert done.text.startswith("--- page 1 ---\nChapter 1 opens here and goes on")
    whole = (tmp_path / "workspaces").glob("*/book.pdf.txt").__next__().read_text()
    assert whole.count("--- page") == 60 and "Chapter 60 opens here" in whole
    assert len(whole) > reader.limits.budget_chars >= len(done.text) - 400
    assert "--- page 60 ---\nChapter 60 opens here" in done.text and "at book.pdf.txt: read it there.]" in done.text
