"""Readable text of a fetched page: HTML and PDF read in a limited child process that dies with the call; text as is."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bicameral.config import child_process_env
from bicameral.web import extract_worker
from bicameral.web.fetch import FetchFailed, Page

log = logging.getLogger(__name__)

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]

_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset({"application/json", "application/xml", "application/javascript"})
_WORKER = "bicameral.web.extract_worker"
# The source tree this module was loaded from: the child runs the same code, whatever else is installed.
_SOURCE = str(Path(__file__).resolve().parents[2])
_STDERR_BYTES = 2000
# How a child stopped by its own limits ends: SIGXCPU at the soft CPU limit, SIGKILL at the hard one.
_OUT_OF_TIME = frozenset({-signal.SIGXCPU, -signal.SIGKILL})


@dataclass(frozen=True)
class ExtractLimits:
    """What reading one document may cost; well under the registry's tool timeout, so the model reads why."""

    cpu_seconds: int = 15
    memory_bytes: int = 512 << 20
    wall_seconds: float = 30.0
    max_pages: int = 200
    max_chars: int = 100_000
    # Children at once across every chat: each may use `memory_bytes`; later documents wait their turn.
    concurrent: int = 4
    # Children at once for one chat: one user's heavy documents queue behind each other, not everyone's.
    per_chat: int = 2


class Extractor:
    """Turns a fetched page into text; HTML and PDF in a child process under `limits`, killed when done or cancelled."""

    def __init__(self, limits: ExtractLimits | None = None, *, spawn: Spawn = asyncio.create_subprocess_exec) -> None:
        self.limits = limits or ExtractLimits()
        self._spawn = spawn
        self._slots = asyncio.Semaphore(self.limits.concurrent)
        self._chats: dict[str, asyncio.Semaphore] = {}

    async def readable_text(self, page: Page, chat: str = "") -> str:
        """The page's text; FetchFailed when its kind is unsupported, it is too costly to read, or nothing is in it."""
        kind = page.content_type or _sniff(page.body)
        if kind in _HTML:
            text = await self._in_child("html", page, chat)
        elif kind == "application/pdf":
            text = await self._in_child("pdf", page, chat)
            if not text.strip():
                raise FetchFailed(f"{page.url} is a PDF without a text layer (scanned pages?); web_fetch reads only text")
        elif kind.startswith("text/") or kind in _TEXT:
            text = page.body.decode(page.charset or "utf-8", errors="replace")
        else:
            raise FetchFailed(f"{page.url} is {kind}, which web_fetch cannot read (it reads HTML, PDF and text)")
        if not text.strip():
            raise FetchFailed(f"{page.url} has no readable text")
        return text.strip()

    async def _in_child(self, kind: str, page: Page, chat: str) -> str:
        """Run the worker on the page's body; its text, or FetchFailed saying which limit it crossed."""
        limits = self.limits
        what = "PDF" if kind == "pdf" else "page"
        mine = self._chats.setdefault(chat, asyncio.Semaphore(limits.per_chat))
        async with mine, self._slots:
            proc = await self._spawn(
                # -P: the working directory is not put on the child's import path.
                sys.executable, "-P", "-m", _WORKER, kind,
                f"--cpu-seconds={limits.cpu_seconds}", f"--memory-bytes={limits.memory_bytes}",
                f"--max-pages={limits.max_pages}", f"--max-chars={limits.max_chars}",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**child_process_env(), "PYTHONPATH": _SOURCE},
            )
            try:
                async with asyncio.timeout(limits.wall_seconds):
                    out, err, overflow = await _exchange(proc, page.body, limits.max_chars * 4)
                    code = await proc.wait()
            except TimeoutError:
                raise FetchFailed(self._too_long(page.url, what)) from None
            finally:
                # Cancelled, timed out or done: the child must not outlive the call.
                await _reap(proc)
        if overflow:
            raise FetchFailed(f"{page.url} gave more text than the {limits.max_chars:,}-character limit; not read")
        if code in _OUT_OF_TIME:
            raise FetchFailed(self._too_long(page.url, what))
        if code == extract_worker.OUT_OF_MEMORY:
            raise FetchFailed(f"{page.url} is too large to read: it needed more than {limits.memory_bytes >> 20} MiB")
        if code != 0:
            log.warning("reading %s failed (exit status %s): %s", page.url, code, err.strip())
            raise FetchFailed(f"{page.url} is a {what} that could not be read")
        return out

    def _too_long(self, url: str, what: str) -> str:
        limits = self.limits
        return (
            f"{url} took too long to read: the {what} needed more than {limits.cpu_seconds} s of CPU "
            f"or {limits.wall_seconds:g} s in all (too large or too complex); not read"
        )


async def _exchange(proc: asyncio.subprocess.Process, body: bytes, max_out: int) -> tuple[str, str, bool]:
    """Write `body` to the child's stdin while reading its stdout and stderr, each bounded; (text, stderr, overflowed)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    async def feed() -> None:
        assert proc.stdin is not None
        # A child that died early (a limit, a crash) closed its end; its exit status says why.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(body)
            await proc.stdin.drain()
            proc.stdin.close()

    _, (out, out_overflow), (err, _) = await asyncio.gather(
        feed(), _bounded(proc.stdout, max_out), _bounded(proc.stderr, _STDERR_BYTES)
    )
    return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), out_overflow


async def _bounded(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    """The stream until its end, keeping at most `limit` bytes; whether more came."""
    kept = bytearray()
    overflow = False
    while chunk := await stream.read(65536):
        room = limit - len(kept)
        if len(chunk) > room:
            overflow = True
        kept += chunk[: max(room, 0)]
    return bytes(kept), overflow


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill the child if it still runs and wait for it, even while the caller is being cancelled."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(ProcessLookupError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=10)


def _sniff(body: bytes) -> str:
    """A content type for a response that declared none."""
    head = body[:512].lstrip().lower()
    if head.startswith(b"%pdf"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    return "application/octet-stream"
