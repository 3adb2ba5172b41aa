"""Readable text of a fetched page or a sent file, read by limited child processes kept warm and killed on trouble."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bicameral.child_env import child_process_env
from bicameral.web import extract_worker
from bicameral.web.fetch import FetchFailed, Page

log = logging.getLogger(__name__)

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]

_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset({"application/json", "application/xml", "application/javascript"})
_WORKER = "bicameral.web.extract_worker"
# The source tree this module was loaded from: the child runs the same code, whatever else is installed.
_SOURCE = str(Path(__file__).resolve().parents[2])
# How a child stopped by its own limits ends: SIGXCPU at the soft CPU limit, SIGKILL at the hard one.
_OUT_OF_TIME = frozenset({-signal.SIGXCPU, -signal.SIGKILL})
# What a reader answers when a check refused a file before any parser ran (extract_formats.Refused).
_REFUSALS = frozenset({"bomb", "unsupported"})


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
    # Readers kept warm between documents (importing the parsers costs ~0.5 s of CPU), and for how long.
    warm: int = 2
    idle_seconds: float = 120.0


class Extractor:
    """Turns a fetched page into text; HTML and PDF in a child process under `limits`, killed when done or cancelled."""

    def __init__(self, limits: ExtractLimits | None = None, *, spawn: Spawn = asyncio.create_subprocess_exec) -> None:
        self.limits = limits or ExtractLimits()
        self._spawn = spawn
        self._slots = asyncio.Semaphore(self.limits.concurrent)
        self._chats: dict[str, asyncio.Semaphore] = {}
        self._idle: list[_Reader] = []
        self._retiring: set[asyncio.Future[int | None]] = set()

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

    async def aclose(self) -> None:
        """Stop the warm readers (at shutdown); a reader at work is stopped by its caller's cancellation."""
        idle, self._idle = self._idle, []
        for reader in idle:
            reader.forget_idle()
        await asyncio.gather(*(_reap(reader.proc) for reader in idle), *self._retiring)

    async def extract(self, kind: str, body: bytes, chat: str = "") -> str:
        """The text a reader gives for `body` read as `kind` (extract_worker.KINDS); ExtractFailed says why not."""
        limits = self.limits
        mine = self._chats.setdefault(chat, asyncio.Semaphore(limits.per_chat))
        async with mine, self._slots:
            reader = await self._reader()
            status, payload, keep = "", b"", False
            try:
                async with asyncio.timeout(limits.wall_seconds):
                    status, payload = await reader.read(kind, body, limits.max_chars * 4)
                keep = status != "oom"
            except TimeoutError:
                raise ExtractFailed("too_long") from None
            except _TooMuchText:
                raise ExtractFailed("too_much_text") from None
            except _Gone:
                code = await _reap(reader.proc)
                if code in _OUT_OF_TIME:
                    raise ExtractFailed("too_long") from None
                if code == extract_worker.OUT_OF_MEMORY:
                    raise ExtractFailed("too_large") from None
                raise ExtractFailed("unreadable", f"the reader ended (exit status {code})") from None
            finally:
                # Cancelled, timed out, or gone: a reader never outlives trouble; one that answered stays warm.
                if keep:
                    self._keep(reader)
                else:
                    await _reap(reader.proc)
        if status == "ok":
            return payload.decode("utf-8", "replace")
        detail = payload.decode("utf-8", "replace")
        raise ExtractFailed(status if status in _REFUSALS else "too_large" if status == "oom" else "unreadable", detail)

    async def _in_child(self, kind: str, page: Page, chat: str) -> str:
        """Have a reader read the page's body; its text, or FetchFailed saying which limit it crossed."""
        what = "PDF" if kind == "pdf" else "page"
        try:
            return await self.extract(kind, page.body, chat)
        except ExtractFailed as failed:
            if failed.reason == "too_long":
                raise FetchFailed(self._too_long(page.url, what)) from None
            if failed.reason == "too_large":
                raise FetchFailed(self._too_large(page.url)) from None
            if failed.reason == "too_much_text":
                limit = self.limits.max_chars
                raise FetchFailed(f"{page.url} gave more text than the {limit:,}-character limit; not read") from None
            log.warning("reading %s failed: %s", page.url, failed.detail)
            raise FetchFailed(f"{page.url} is a {what} that could not be read") from None

    async def _reader(self) -> _Reader:
        """A warm reader if one waits, else a new child limited as `limits` says."""
        if self._idle:
            reader = self._idle.pop()
            reader.forget_idle()
            return reader
        limits = self.limits
        proc = await self._spawn(
            # -P: the working directory is not put on the child's import path.
            sys.executable, "-P", "-m", _WORKER,
            f"--cpu-seconds={limits.cpu_seconds}", f"--memory-bytes={limits.memory_bytes}",
            f"--max-pages={limits.max_pages}", f"--max-chars={limits.max_chars}",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**child_process_env(), "PYTHONPATH": _SOURCE},
        )
        return _Reader(proc)

    def _keep(self, reader: _Reader) -> None:
        """Keep a reader warm for the next document, for a while; beyond `warm` of them, let it go."""
        if len(self._idle) >= self.limits.warm:
            self._retire(reader)
            return
        self._idle.append(reader)
        reader.idle = asyncio.get_running_loop().call_later(self.limits.idle_seconds, self._expire, reader)

    def _expire(self, reader: _Reader) -> None:
        if reader in self._idle:
            self._idle.remove(reader)
            self._retire(reader)

    def _retire(self, reader: _Reader) -> None:
        reader.forget_idle()
        task = asyncio.ensure_future(_reap(reader.proc))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    def _too_long(self, url: str, what: str) -> str:
        limits = self.limits
        return (
            f"{url} took too long to read: the {what} needed more than {limits.cpu_seconds} s of CPU "
            f"or {limits.wall_seconds:g} s in all (too large or too complex); not read"
        )

    def _too_large(self, url: str) -> str:
        return f"{url} is too large to read: it needed more than {self.limits.memory_bytes >> 20} MiB"


class ExtractFailed(Exception):
    """Why a reader gave no text: `reason` is too_long (CPU or wall clock), too_large (memory), too_much_text,
    unreadable (the parser failed; `detail` says how, for the log), or a refusal before parsing: bomb, unsupported."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class _Gone(Exception):
    """The reader ended mid-document (a limit's signal, a crash): its exit status says why."""


class _TooMuchText(Exception):
    """The reader answered with more than the parent takes."""


class _Reader:
    """One warm child: one document at a time (see extract_worker for the framing)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.idle: asyncio.TimerHandle | None = None

    def forget_idle(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None

    async def read(self, kind: str, body: bytes, max_out: int) -> tuple[str, bytes]:
        """Send one document and read the answer: (status, payload)."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(f"{kind} {len(body)}\n".encode("ascii") + body)
            await stdin.drain()
            head = (await stdout.readline()).split()
            if len(head) != 2 or not head[1].isdigit():
                raise _Gone
            if int(head[1]) > max_out:
                raise _TooMuchText
            return head[0].decode("ascii", "replace"), await stdout.readexactly(int(head[1]))
        except (BrokenPipeError, ConnectionResetError, asyncio.IncompleteReadError):
            raise _Gone from None


async def _reap(proc: asyncio.subprocess.Process) -> int | None:
    """Kill the child if it still runs and wait for it, even while the caller is being cancelled; its exit status."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(ProcessLookupError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=10)
    return proc.returncode


def _sniff(body: bytes) -> str:
    """A content type for a response that declared none."""
    head = body[:512].lstrip().lower()
    if head.startswith(b"%pdf"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    return "application/octet-stream"
