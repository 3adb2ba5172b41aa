"""Hostile documents cost a bounded reader, never the assistant: bombs, huge files and planted links get a note."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tracemalloc
from pathlib import Path

from bicameral.failures import document_too_big, failure_sentence
from bicameral.media.documents import DocumentLimits, DocumentReader
from bicameral.sandbox.workspace import workspace_for
from tests.media.files import CHAT, sent, zip_bomb_docx
from tests.web.hostile import heavy_pdf, memory_hungry_pdf, pdf, text_page


def reader(**limits: object) -> DocumentReader:
    base = DocumentLimits().extract
    return DocumentReader(DocumentLimits(extract=dataclasses.replace(base, **limits)))  # type: ignore[arg-type]


async def test_a_zip_bomb_inside_a_word_file_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    bomb = zip_bomb_docx(300 << 20)  # 300 MB of zeros in a file of a few hundred KB
    assert len(bomb) < 1 << 20
    done = await DocumentReader().read(sent(tmp_path, "letter.docx", bomb), data_dir=tmp_path, chat=CHAT)
    assert done.note == failure_sentence("document_bomb") and done.text is None


async def test_an_entry_packed_far_tighter_than_any_document_is_refused_even_when_small(tmp_path: Path) -> None:
    bomb = zip_bomb_docx(32 << 20)  # under the size cap, but 1000 times its packed size
    done = await DocumentReader().read(sent(tmp_path, "sheet.xlsx", bomb), data_dir=tmp_path, chat=CHAT)
    assert done.note == failure_sentence("document_bomb")


async def test_a_pdf_that_takes_too_much_cpu_is_stopped_and_others_keep_being_read(tmp_path: Path) -> None:
    slow = reader(cpu_seconds=1, wall_seconds=60.0)
    done = await slow.read(sent(tmp_path, "heavy.pdf", heavy_pdf()), data_dir=tmp_path, chat=CHAT)
    assert done.note in (failure_sentence("document_too_costly"), failure_sentence("unreadable_file")), done.note
    fine = await slow.read(sent(tmp_path, "fine.pdf", pdf([text_page("still reading")])), data_dir=tmp_path, chat=CHAT)
    assert fine.text == "--- page 1 ---\nstill reading"


async def test_a_pdf_that_needs_too_much_memory_is_stopped(tmp_path: Path) -> None:
    done = await DocumentReader().read(sent(tmp_path, "big.pdf", memory_hungry_pdf()), data_dir=tmp_path, chat=CHAT)
    assert done.note in (failure_sentence("document_too_costly"), failure_sentence("unreadable_file")), done.note


async def test_a_pdf_with_more_pages_than_the_cap_is_read_up_to_it(tmp_path: Path) -> None:
    many = pdf([], shared=text_page("same words"), pages=40)
    done = await reader(max_pages=5).read(sent(tmp_path, "long.pdf", many), data_dir=tmp_path, chat=CHAT)
    text = (workspace_for(tmp_path, CHAT) / "long.pdf.txt").read_text()
    assert text.count("--- page") == 5 and text.endswith("--- page 5 ---\nsame words\n[… 35 more pages not read]")
    assert done.text == text


async def test_a_2_gb_file_is_refused_by_its_size_without_being_read(tmp_path: Path) -> None:
    huge = sent(tmp_path, "backup.pdf", size=2 << 30)  # sparse: nothing of it is on the disk
    tracemalloc.start()
    try:
        done = await DocumentReader().read(huge, data_dir=tmp_path, chat=CHAT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert done.note == document_too_big(20) and done.text is None
    assert peak < 4 << 20  # the size was looked at, not the bytes


async def test_the_size_limit_is_the_configured_one(tmp_path: Path) -> None:
    small = DocumentReader(DocumentLimits(max_bytes=1 << 20))
    done = await small.read(sent(tmp_path, "notes.txt", b"x" * (2 << 20)), data_dir=tmp_path, chat=CHAT)
    assert done.note == document_too_big(1)


async def test_a_link_planted_where_the_text_goes_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    attachment = sent(tmp_path, "report.pdf", pdf([text_page("report words")]))
    planted = workspace_for(tmp_path, CHAT) / "report.pdf.txt"
    os.symlink(secret, planted)
    done = await DocumentReader().read(attachment, data_dir=tmp_path, chat=CHAT)
    assert done.text == "--- page 1 ---\nreport words" and done.text_path is None
    assert secret.read_text() == "host secret" and planted.is_symlink()


async def test_other_chats_are_read_while_a_slow_document_reads(tmp_path: Path) -> None:
    slow = reader(cpu_seconds=60, wall_seconds=60.0)
    reading = asyncio.create_task(slow.read(sent(tmp_path, "heavy.pdf", heavy_pdf()), data_dir=tmp_path, chat=CHAT))
    quick = sent(tmp_path, "quick.pdf", pdf([text_page("quick note")]))
    other = await slow.read(quick, data_dir=tmp_path, chat="telegram:2002")  # the same reader, another chat
    assert other.text == "--- page 1 ---\nquick note"
    assert await asyncio.to_thread(lambda: "served") == "served"
    assert not reading.done()  # the heavy one was still being read all the while
    reading.cancel()
