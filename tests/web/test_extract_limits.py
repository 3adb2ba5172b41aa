"""Reading untrusted documents happens in a child process with limits: it cannot stall the loop, and it dies with the call."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from bicameral.tools.web import FetchArgs, WebFetch
from bicameral.web.extract import ExtractLimits, Extractor
from bicameral.web.fetch import FetchFailed, Page
from tests.support.chat import eventually
from tests.web.conftest import local_fetcher
from tests.web.hostile import drawing_only_pdf, heavy_pdf, memory_hungry_pdf, pdf, text_page

# One CPU second, and a wall clock generous enough that the CPU limit is what stops the reader.
TINY = ExtractLimits(cpu_seconds=1, wall_seconds=60.0)


class Recorded:
    """The real process runner, keeping every child it started."""

    def __init__(self) -> None:
        self.children: list[asyncio.subprocess.Process] = []

    async def __call__(self, *argv: str, **options: object) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(*argv, **options)  # type: ignore[arg-type]
        self.children.append(proc)
        return proc


def _pdf_page(body: bytes, url: str = "https://example.test/report.pdf") -> Page:
    return Page(url, "application/pdf", None, body)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_a_pdf_too_costly_to_read_is_refused_while_the_loop_and_its_threads_keep_serving(site, ctx):
    # One worker thread: were the reading done in the default pool, the to_thread call below would wait for it.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
    runner = Recorded()
    tool = WebFetch(local_fetcher(), Extractor(TINY, spawn=runner))
    site.serve("/heavy.pdf", heavy_pdf(), "application/pdf")
    reading = asyncio.create_task(tool.run(FetchArgs(url=site.url("/heavy.pdf")), ctx))
    await eventually(lambda: runner.children)
    assert await asyncio.to_thread(lambda: "served") == "served"
    assert not reading.done()  # the reader was still at work meanwhile
    result = await reading
    assert result.is_error, result.content
    # Under heavy load asyncio's child watcher may report the killed reader as an unknown pid (exit status 255):
    # the refusal is then the plainer "could not be read". Either way the PDF is refused and the reader is gone.
    timed_out = "took too long to read" in result.content and "1 s of CPU" in result.content
    assert timed_out or "could not be read" in result.content, result.content
    assert _gone(runner.children[0].pid)


async def test_cancelling_the_call_kills_the_reader():
    runner = Recorded()
    extractor = Extractor(ExtractLimits(cpu_seconds=60, wall_seconds=60.0), spawn=runner)
    reading = asyncio.create_task(extractor.readable_text(_pdf_page(heavy_pdf())))
    await eventually(lambda: runner.children)
    pid = runner.children[0].pid
    await eventually(lambda: psutil.Process(pid).cpu_times().user > 0.5)  # well into the document
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert _gone(pid)
    assert not psutil.pid_exists(pid)  # reaped, not left a zombie


async def test_the_wall_clock_limit_kills_a_reader_that_is_not_using_the_cpu():
    runner = Recorded()
    # A CPU budget it does not reach in one second: the wall clock is what ends it.
    extractor = Extractor(ExtractLimits(cpu_seconds=60, wall_seconds=1.0), spawn=runner)
    with pytest.raises(FetchFailed, match="took too long to read"):
        await extractor.readable_text(_pdf_page(heavy_pdf()))
    assert _gone(runner.children[0].pid)


async def test_a_pdf_without_a_text_layer_says_so():
    with pytest.raises(FetchFailed, match="PDF without a text layer"):
        await Extractor().readable_text(_pdf_page(drawing_only_pdf()))


async def test_pages_past_the_page_cap_are_not_read():
    document = pdf([text_page("first page"), text_page("second page"), text_page("third page")])
    text = await Extractor(ExtractLimits(max_pages=2)).readable_text(_pdf_page(document))
    assert "first page" in text and "second page" in text and "third page" not in text


async def test_the_text_is_capped():
    document = pdf([text_page(f"page {i} " + "words " * 40) for i in range(20)])
    text = await Extractor(ExtractLimits(max_chars=300)).readable_text(_pdf_page(document))
    assert 0 < len(text) <= 300 and "page 0" in text and "page 19" not in text


async def test_a_reader_out_of_memory_is_too_large_to_read():
    with pytest.raises(FetchFailed, match="too large to read: it needed more than 160 MiB"):
        await Extractor(ExtractLimits(memory_bytes=160 << 20)).readable_text(_pdf_page(memory_hungry_pdf()))


async def test_hostile_html_is_read_in_the_child_too():
    runner = Recorded()
    html = b"<html><body><article><p>" + b"word " * 400 + b"</p></article></body></html>"
    page = Page("https://example.test/", "text/html", "utf-8", html)
    extractor = Extractor(spawn=runner)
    assert "word word" in await extractor.readable_text(page)
    assert "word word" in await extractor.readable_text(page)
    assert len(runner.children) == 1, "one warm reader reads both: the parsers are imported once"
    await extractor.aclose()
    assert _gone(runner.children[0].pid), "no reader outlives its extractor"


async def test_one_chats_documents_queue_behind_each_other_not_everyones():
    started: list[str] = []
    release = asyncio.Event()

    async def held(*argv: str, **options: object) -> asyncio.subprocess.Process:
        started.append("child")
        await release.wait()
        return await asyncio.create_subprocess_exec(*argv, **options)  # type: ignore[arg-type]

    extractor = Extractor(ExtractLimits(concurrent=4, per_chat=2), spawn=held)
    page = Page("https://example.test/", "text/html", "utf-8", b"<html><body><p>" + b"word " * 50 + b"</p></body></html>")
    greedy = [asyncio.create_task(extractor.readable_text(page, "telegram:1")) for _ in range(5)]
    await eventually(lambda: len(started) == 2)
    other = asyncio.create_task(extractor.readable_text(page, "telegram:2"))
    await eventually(lambda: len(started) == 3)  # another chat's document starts at once, beside the first two
    release.set()
    assert all("word" in t for t in await asyncio.gather(*greedy, other))
