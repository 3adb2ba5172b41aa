"""`Downloads`: what a chat's page downloads, each kept through a `Keep` once finished and within a size limit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.async_api import Download

# Where a finished download goes: (the file Chromium wrote, the name the site suggested) -> its name in the workspace.
Keep = Callable[[Path, str], Awaitable[str]]


class Downloads:
    """One page's downloads. Chromium writes each to its own temporary folder first; the size is checked once it is
    complete, so a download larger than `max_bytes` costs disk until then, and one still running when its action's
    time is up is cancelled, which bounds it by the time limit. Every outcome is a note for the tool's result."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.keep: Keep | None = None
        self._tasks: list[asyncio.Task[str]] = []
        self._arrived = asyncio.Event()

    def started(self, download: Download) -> None:
        """Playwright's `download` event: save it in the background."""
        self._tasks.append(asyncio.ensure_future(self._save(download)))
        self._arrived.set()

    def mark(self) -> None:
        """An action begins: `arrival` waits for a download it starts."""
        self._arrived.clear()

    async def arrival(self) -> None:
        """Until a download has started since `mark()` (a navigation that became one may say so before the event)."""
        await self._arrived.wait()

    async def finished(self, timeout: float) -> list[str]:
        """Wait up to `timeout` for the downloads not reported yet (one may start just after the action that caused
        it, and is reported by the next); cancel those still running. Their notes."""
        pending, self._tasks = self._tasks, []
        if not pending:
            return []
        done, unfinished = await asyncio.wait(pending, timeout=timeout)
        for task in unfinished:
            task.cancel()
        notes = [task.result() for task in pending if task in done and not task.cancelled()]
        return notes + [f"a download was still running after {timeout:g} s; cancelled" for _ in unfinished]

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()

    async def _save(self, download: Download) -> str:
        name = download.suggested_filename[:200] or "download"
        try:
            path = await download.path()
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(download.cancel())
            raise
        except Exception as exc:  # a failed download: a note, never a crash
            return f"the download {name!r} failed ({_first_line(exc)})"
        try:
            size = path.stat().st_size
            if size > self.max_bytes:
                return f"the download {name!r} is {size:,} bytes, over the {self.max_bytes:,}-byte limit; not kept"
            if self.keep is None:
                return f"the download {name!r} was not kept"
            kept = await self.keep(path, name)
            return f"downloaded {name!r} into the workspace as {kept} ({size:,} bytes)"
        except Exception as exc:  # a full workspace, a name taken too often: a note
            return f"the download {name!r} could not be kept ({_first_line(exc)})"
        finally:
            with contextlib.suppress(Exception):
                await download.delete()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__
