"""`Chromium`: one warm headless Chromium per process through Playwright, started on first use, closed when idle."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bicameral.errors import BicameralError

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Playwright

log = logging.getLogger(__name__)

# Debian's binary itself, not the /usr/bin/chromium launcher script (scripts/setup installs it).
DEFAULT_CHROMIUM = "/usr/lib/chromium/chromium"
# Containers often give /dev/shm only 64 MB, too little for a renderer's shared memory. WebRTC sends its UDP
# (STUN, TURN) past any proxy a context has: only what goes through the context's proxy may leave.
_ARGS = (
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--mute-audio",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)


class ChromiumOff(BicameralError):
    """Chromium cannot be used here; the message says why in a sentence."""


class Chromium:
    """One headless Chromium for the whole process (the app builds one and hands it to every tool that renders or
    browses).

    `new_context(**kwargs)` starts the browser on first use (concurrent first uses start one) and returns a fresh
    Playwright `BrowserContext` (kwargs as `Browser.new_context`: viewport, offline, java_script_enabled, ...); the
    caller closes it. Once no context has been open for `idle_seconds` a timer closes the browser and the next use
    starts it again. A browser that crashes or is killed is noticed (its `disconnected` event) and the next use
    starts a new one. `why_off()` says in a sentence why it cannot run here (or None); `aclose()` closes it for good
    until the next use.
    """

    def __init__(
        self,
        executable: str | Path = DEFAULT_CHROMIUM,
        *,
        idle_seconds: float = 120.0,
        launch_timeout_seconds: float = 30.0,
        args: tuple[str, ...] = _ARGS,
    ) -> None:
        self.executable = Path(executable)
        self._idle_seconds = idle_seconds
        self._launch_timeout = launch_timeout_seconds
        self._args = args
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._contexts: set[BrowserContext] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        # How many browsers this instance has started: tests and doctor read it.
        self.launches = 0

    def why_off(self) -> str | None:
        """None when Chromium can be started here; otherwise why not, in a sentence (for doctor, /audit, the tools)."""
        if importlib.util.find_spec("playwright") is None:
            return "Playwright is not installed (pip install playwright, or run scripts/setup)"
        if not self.executable.is_file():
            return f"Chromium is not installed at {self.executable} (run scripts/setup, or set BICAMERAL_CHROMIUM_PATH)"
        if not os.access(self.executable, os.X_OK):
            return f"{self.executable} is not executable"
        return None

    def available(self) -> bool:
        """Whether `why_off()` finds nothing in the way (it does not start the browser)."""
        return self.why_off() is None

    @property
    def running(self) -> bool:
        """A browser is up and connected right now."""
        return self._browser is not None and self._browser.is_connected()

    async def new_context(self, **kwargs: Any) -> BrowserContext:
        """A new BrowserContext in the warm browser (started if need be); raises `ChromiumOff` when it cannot start."""
        if why := self.why_off():
            raise ChromiumOff(why)
        async with self._lock:
            self._disarm()
            browser = self._browser if self.running else await self._start()
            assert browser is not None
            try:
                context = await browser.new_context(**kwargs)
            except Exception as exc:
                self._arm_if_idle()
                raise ChromiumOff(f"Chromium could not open a page: {_first_line(exc)}") from exc
            self._contexts.add(context)
        context.on("close", lambda closed: self._released(closed))
        return context

    async def aclose(self) -> None:
        """Close the browser and the Playwright driver now; a later `new_context` starts them again."""
        self._disarm()
        async with self._lock:
            await self._shutdown()

    async def _start(self) -> Browser:
        from playwright.async_api import async_playwright

        await self._shutdown()
        try:
            self._playwright = await async_playwright().start()
            browser = await self._playwright.chromium.launch(
                executable_path=str(self.executable),
                headless=True,
                args=list(self._args),
                timeout=self._launch_timeout * 1000,
            )
        except Exception as exc:
            await self._shutdown()
            raise ChromiumOff(f"Chromium did not start: {_first_line(exc)}") from exc
        self.launches += 1
        browser.on("disconnected", lambda gone: self._lost(gone))
        self._browser = browser
        log.info("chromium started (%s, %s)", self.executable, browser.version)
        return browser

    async def _shutdown(self) -> None:
        """Close what is open, each part on its own: a crashed browser must not keep the driver running."""
        browser, playwright = self._browser, self._playwright
        self._browser, self._playwright = None, None
        self._contexts.clear()
        if browser is not None:
            try:
                await browser.close()
            except Exception as exc:  # already gone: nothing to close
                log.debug("chromium close: %s", _first_line(exc))
        if playwright is not None:
            try:
                await playwright.stop()
            except Exception as exc:
                log.debug("playwright stop: %s", _first_line(exc))

    def _released(self, context: BrowserContext) -> None:
        self._contexts.discard(context)
        self._arm_if_idle()

    def _lost(self, browser: Browser) -> None:
        if browser is not self._browser:
            return  # one we closed ourselves
        log.warning("chromium disconnected; the next use starts a new one")
        self._browser = None
        self._contexts.clear()
        # The driver outlives the browser: the idle timer stops it too.
        self._arm_if_idle()

    def _arm_if_idle(self) -> None:
        if self._contexts or (self._browser is None and self._playwright is None):
            return
        self._disarm()
        self._timer = asyncio.get_running_loop().call_later(self._idle_seconds, self._idle_fired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _idle_fired(self) -> None:
        self._timer = None
        self._closing = asyncio.get_running_loop().create_task(self._close_if_idle())

    async def _close_if_idle(self) -> None:
        async with self._lock:
            if self._contexts or self._timer is not None:
                return  # used again since the timer fired
            log.info("chromium idle for %.0f s: closing it", self._idle_seconds)
            await self._shutdown()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
