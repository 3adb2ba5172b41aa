"""Heavy tools: a plain message's answer time alone, and while five other users each web_fetch a costly PDF."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from ipaddress import ip_network
from pathlib import Path

import psutil

from bench.harness import TimedTelegram, bench_settings, fakes, file_logging, open_access, tag, tag_of, wait_until
from bench.load import warm_up
from bench.report import Figure
from bench.tools import loopback, serving
from bicameral.app import App, telegram_config
from bicameral.channels.telegram import TelegramChannel
from bicameral.config import Settings
from bicameral.tools.web import WebFetch
from bicameral.web.address import AddressPolicy
from bicameral.web.extract import ExtractLimits, Extractor
from bicameral.web.fetch import WebFetcher
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.web.hostile import heavy_pdf

HEAVY_USERS = 5
SAMPLES = 5  # plain messages measured alone, then as many under load
PLAIN_CHAT = 7000
FIRST_HEAVY_CHAT = 7100
ASK_HEAVY = "please read the report"
HEAVY_TIMEOUT = 180.0
_WORKER = "bicameral.web.extract_worker"
_READ = "read: "  # how the model's answer after a heavy web_fetch begins


@dataclass
class HeavyResult:
    pdf_bytes: int
    limits: ExtractLimits
    alone: list[float] = field(default_factory=list)  # seconds, update handed out → the plain answer's sendMessage
    loaded: list[float] = field(default_factory=list)
    readers_seen: int = 0  # extraction children running at once, at most, while the plain messages were answered
    under_load: int = 0  # plain answers that arrived while a reader was still running
    heavy_answers: list[float] = field(default_factory=list)  # seconds, heavy request → its answer
    heavy_outcomes: list[str] = field(default_factory=list)  # what each heavy web_fetch gave the model

    def figures(self) -> list[Figure]:
        name = "heavy"
        alone = statistics.median(self.alone)
        loaded = statistics.median(self.loaded)
        limits = self.limits
        outcomes = ", ".join(f"{n}× {what}" for what, n in _counted(self.heavy_outcomes))
        return [
            Figure(name, "plain message answered, alone p50", alone * 1000, "ms",
                   f"{len(self.alone)} messages one after another, single mode, 0 s model; max {max(self.alone) * 1000:.0f} ms"),
            Figure(name, f"plain message answered, {HEAVY_USERS} heavy web_fetch running p50", loaded * 1000, "ms",
                   f"{len(self.loaded)} messages, {self.under_load} answered while a reader still ran "
                   f"({self.readers_seen} reader processes at most); max {max(self.loaded) * 1000:.0f} ms"),
            Figure(name, "under load / alone", loaded / alone, "x", "the p50s above"),
            Figure(name, "heavy web_fetch answered p50", statistics.median(self.heavy_answers), "s",
                   f"{HEAVY_USERS} users each fetch a {self.pdf_bytes / 1024:.0f} KiB PDF of 200 dense pages; "
                   f"reader limits {limits.cpu_seconds} s CPU, {limits.wall_seconds:g} s wall, {limits.concurrent} at once; "
                   f"the tool said: {outcomes}"),
        ]


def _counted(outcomes: list[str]) -> list[tuple[str, int]]:
    kinds = ["took too long to read" if "took too long" in o else o[:80] for o in outcomes]
    return [(kind, kinds.count(kind)) for kind in dict.fromkeys(kinds)]


def _scripted(url: str) -> Callable[[Request], Reply]:
    """The one model: a heavy user's request becomes a web_fetch of the PDF; anything else is answered at once."""

    def respond(req: Request) -> Reply:
        results = req.tool_results()
        if results:
            return Reply(text=_READ + results[0]["content"][:300])
        text = req.last_user_text()
        if ASK_HEAVY in text:
            return Reply(tool_calls=[ToolCall("web_fetch", {"url": url})])
        found = tag_of(text)
        return Reply(text=f"ok {tag(found)}" if found is not None else "ok")

    return respond


@asynccontextmanager
async def _app(settings: Settings, limits: ExtractLimits) -> AsyncIterator[App]:
    """The real assistant, its web_fetch allowed to reach the local server (the bench's own allowance)."""
    fetcher = WebFetcher(policy=AddressPolicy(allowed=(ip_network("127.0.0.1/32"),)), resolve=loopback)
    with file_logging(settings):
        app = App(settings, [TelegramChannel(telegram_config(settings))], extra_tools=[WebFetch(fetcher, Extractor(limits))])
        await app.start()
        try:
            yield app
        finally:
            await app.stop()


def _readers() -> int:
    """Extraction children of this process running now."""
    count = 0
    for child in psutil.Process().children(recursive=True):
        try:
            count += _WORKER in " ".join(child.cmdline())
        except psutil.Error:
            pass
    return count


def _heavy_answers(telegram: TimedTelegram) -> list[tuple[str, float]]:
    """(text, ts) of each heavy user's answer (not the progress note shown meanwhile)."""
    return [
        (text, call.ts)
        for call in telegram.calls_to("sendMessage")
        if call.status == 200 and int(call.params.get("chat_id", 0)) >= FIRST_HEAVY_CHAT
        and (text := str(call.params.get("text", ""))).startswith(_READ)
    ]


async def _plain(telegram: TimedTelegram, n: int) -> float:
    """One tagged DM from the plain user; seconds from its hand-out to the answer's sendMessage."""
    message = telegram.user_sends(PLAIN_CHAT, f"hello {tag(n)}")

    def answered() -> list[float]:
        return [ts for text, ts in telegram.send_calls() if tag_of(text) == n]

    await wait_until(lambda: bool(answered()), timeout=HEAVY_TIMEOUT, interval=0.005)
    return answered()[0] - telegram.handed_out[(PLAIN_CHAT, int(message["message_id"]))]


async def run_heavy(samples: int = SAMPLES, limits: ExtractLimits | None = None) -> HeavyResult:
    """Plain messages alone, then while HEAVY_USERS others each web_fetch the heavy PDF; `limits`: the shipped ones."""
    document = heavy_pdf()
    result = HeavyResult(pdf_bytes=len(document), limits=limits or ExtractLimits())
    with (
        fakes() as (telegram, models),
        tempfile.TemporaryDirectory(prefix="bench-heavy-") as tmp,
        serving(document, "application/pdf") as port,
    ):
        url = f"http://reports.test:{port}/report.pdf"
        models.responder(_scripted(url))
        settings = bench_settings(Path(tmp), telegram, models, "single")
        open_access(settings.data_dir)
        async with _app(settings, result.limits):
            await warm_up(telegram)
            for n in range(samples):
                result.alone.append(await _plain(telegram, n))
            started = time.monotonic()
            for i in range(HEAVY_USERS):
                # The address is in their own words: a fetch of one they did not give waits for the owner's approval.
                telegram.user_sends(FIRST_HEAVY_CHAT + i, f"{ASK_HEAVY} at {url}")
            wanted = min(HEAVY_USERS, result.limits.concurrent)
            await wait_until(lambda: _readers() >= wanted, timeout=HEAVY_TIMEOUT, interval=0.01)
            for n in range(samples, 2 * samples):
                result.readers_seen = max(result.readers_seen, _readers())
                result.loaded.append(await _plain(telegram, n))
                result.under_load += _readers() > 0
            await wait_until(lambda: len(_heavy_answers(telegram)) >= HEAVY_USERS, timeout=HEAVY_TIMEOUT)
        answers = _heavy_answers(telegram)
        result.heavy_answers = [ts - started for _, ts in answers]
        result.heavy_outcomes = [text.removeprefix(_READ) for text, _ in answers]
    return result
