"""`BrowserSessions`: a page per chat in the shared Chromium, behind its own guarded proxy, each action bounded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from bicameral.browser.chromium import Chromium, ChromiumOff
from bicameral.browser.downloads import Downloads, Keep
from bicameral.errors import BicameralError
from bicameral.failures import browser_cut_off, browser_failed, browser_no_page, browser_off

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

log = logging.getLogger(__name__)

T = TypeVar("T")
# WebRTC is the one way a page reaches the network without the proxy (UDP to any address): it is taken away in every
# frame before the page's own scripts run.
_NO_WEBRTC = (
    "for (const name of ['RTCPeerConnection', 'webkitRTCPeerConnection', 'RTCDataChannel', 'RTCIceCandidate']) {"
    " try { Object.defineProperty(window, name, {value: undefined, writable: false, configurable: false}); }"
    " catch (e) {} }"
)
_VISIBLE_TEXT = "document.body ? document.body.innerText : ''"


class Gateway(Protocol):
    """The guarded proxy a chat's page goes through (web/proxy.py's GuardedProxy): started per page, closed with it."""

    refused: list[str]

    async def start(self) -> str: ...

    async def aclose(self) -> None: ...


class BrowseFailed(BicameralError):
    """A browser action that failed or was cut off; the message is the sentence for the model."""


class _CutOff(BrowseFailed):
    """A page stopped for what it did (endless loading, a flood of windows): the chat's page is closed."""


@dataclass(frozen=True)
class BrowserLimits:
    """How long an action may take (a navigation's load included), how long an element is waited for, how long an
    unused page stays open, how many windows a page may open in one action, how big a download may be."""

    timeout_seconds: float = 20.0
    element_seconds: float = 5.0
    idle_seconds: float = 300.0
    max_popups: int = 10
    download_max_bytes: int = 50_000_000
    width: int = 1280
    height: int = 800


@dataclass(frozen=True)
class Visit:
    """Where the page is after an action, and what happened on the way (refused requests, popups, downloads)."""

    url: str
    title: str
    status: int | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """The page as it is now: its address, title, HTML (after its scripts ran) and visible text."""

    url: str
    title: str
    html: str
    text: str


@dataclass(eq=False)
class _Tab:
    """One chat's context, page and proxy, and what happened during the action under way."""

    context: BrowserContext
    gateway: Gateway
    downloads: Downloads
    page: Page | None = None
    popups: int = 0  # in the action under way
    unreported: int = 0  # closed since the last result said so
    popup_urls: list[str] = field(default_factory=list)
    tripped: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None


class BrowserSessions:
    """A page per chat, opened by its first navigation and closed after `idle_seconds` unused.

    Every action of a chat runs under that chat's lock and within `timeout_seconds`: a page that hangs holds only its
    own chat, and one still loading at the limit, or opening more than `max_popups` windows in one action, is closed
    with a sentence. Each chat's context sends all its traffic through its own `Gateway` (a proxy that checks every
    request's address), so redirects, subresources, websockets and popups keep web_fetch's address rules.
    """

    def __init__(self, chromium: Chromium, gateway: Callable[[], Gateway], limits: BrowserLimits | None = None) -> None:
        self.chromium = chromium
        self.limits = limits or BrowserLimits()
        self._gateway = gateway
        self._tabs: dict[str, _Tab] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def is_open(self, chat: str) -> bool:
        return chat in self._tabs

    async def navigate(self, chat: str, url: str, keep: Keep) -> Visit:
        async def go(page: Page) -> int | None:
            from playwright.async_api import Error as PlaywrightError

            try:
                response = await page.goto(url, wait_until="load", timeout=self._ms(self.limits.timeout_seconds))
            except PlaywrightError as exc:
                if "Download is starting" in str(exc):
                    await self._tabs[chat].downloads.arrival()  # the address is a file: it lands in the workspace
                    return None
                raise
            return response.status if response is not None else None

        return await self._visit(chat, keep, go, create=True)

    async def click(self, chat: str, keep: Keep, *, selector: str | None = None, text: str | None = None) -> Visit:
        async def press(page: Page) -> None:
            target = page.locator(selector) if selector is not None else page.get_by_text(text or "")
            await self._on_element(target.first.click(timeout=self._ms(self.limits.element_seconds)))
            await page.wait_for_load_state("load", timeout=self._ms(self.limits.timeout_seconds))

        return await self._visit(chat, keep, press)

    async def type(self, chat: str, keep: Keep, selector: str, text: str, *, submit: bool) -> Visit:
        async def fill(page: Page) -> None:
            field_ = page.locator(selector).first
            await self._on_element(field_.fill(text, timeout=self._ms(self.limits.element_seconds)))
            if submit:
                await self._on_element(field_.press("Enter", timeout=self._ms(self.limits.element_seconds)))
                await page.wait_for_load_state("load", timeout=self._ms(self.limits.timeout_seconds))

        return await self._visit(chat, keep, fill)

    async def back(self, chat: str, keep: Keep) -> Visit | None:
        """The previous page, or None when there is none in this chat's history."""
        went: list[bool] = []

        async def go_back(page: Page) -> None:
            response = await page.go_back(wait_until="load", timeout=self._ms(self.limits.timeout_seconds))
            went.append(response is not None)

        visit = await self._visit(chat, keep, go_back)
        return visit if went and went[0] else None

    async def read(self, chat: str) -> Snapshot:
        async def take(tab: _Tab) -> Snapshot:
            page = _page(tab)
            html = await page.content()
            text = await page.evaluate(_VISIBLE_TEXT)
            return Snapshot(page.url, await page.title(), html, str(text or ""))

        snapshot, _ = await self._act(chat, None, take)
        return snapshot

    async def screenshot(self, chat: str) -> tuple[str, bytes]:
        """The page's address and a PNG of what its window shows."""

        async def shoot(tab: _Tab) -> tuple[str, bytes]:
            page = _page(tab)
            png = await page.screenshot(type="png", animations="disabled", timeout=self._ms(self.limits.timeout_seconds))
            return page.url, png

        shot, _ = await self._act(chat, None, shoot)
        return shot

    async def close(self, chat: str) -> None:
        """Close the chat's page now (it is opened again by the next navigation)."""
        async with self._lock(chat):
            await self._drop(chat)

    async def aclose(self) -> None:
        for chat in list(self._tabs):
            await self._drop(chat)
        for task in list(self._closing):
            task.cancel()

    # --- the machinery ---

    async def _visit(self, chat: str, keep: Keep, step: Callable[[Page], Awaitable[object]], *, create: bool = False) -> Visit:
        async def act(tab: _Tab) -> Visit:
            page = _page(tab)
            outcome = await step(page)
            return Visit(page.url, await page.title(), outcome if isinstance(outcome, int) else None)

        visit, notes = await self._act(chat, keep, act, create=create)
        return Visit(visit.url, visit.title, visit.status, notes)

    async def _act(
        self, chat: str, keep: Keep | None, step: Callable[[_Tab], Awaitable[T]], *, create: bool = False
    ) -> tuple[T, tuple[str, ...]]:
        """Run one step on the chat's page under its lock and the time limit; the result and what happened on the way."""
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        async with self._lock(chat):
            tab = self._tabs.get(chat) or (await self._open(chat) if create else None)
            if tab is None:
                raise BrowseFailed(browser_no_page())
            self._disarm(tab)
            tab.downloads.keep = keep or tab.downloads.keep
            tab.popups = 0
            tab.gateway.refused.clear()  # what the page did before this action was reported then, or not asked
            tab.tripped.clear()
            tab.downloads.mark()
            work = asyncio.ensure_future(step(tab))
            stop = asyncio.ensure_future(tab.tripped.wait())
            # A little past Playwright's own limits: this one catches a page whose scripts keep Chromium from answering.
            try:
                done, _ = await asyncio.wait({work, stop}, timeout=self.limits.timeout_seconds + 5, return_when="FIRST_COMPLETED")
            except asyncio.CancelledError:  # the caller gave up (a turn stopped, the registry's timeout): so does the page
                work.cancel()
                stop.cancel()
                await asyncio.shield(self._drop(chat))
                raise
            for task in (work, stop):
                task.cancel()
            limit = f"{self.limits.timeout_seconds:g} s"
            try:
                if stop in done:
                    raise _CutOff(browser_cut_off(f"it opened more than {self.limits.max_popups} windows"))
                if work not in done:
                    raise _CutOff(browser_cut_off(f"it did not answer within {limit}"))
                try:
                    result = work.result()
                except PlaywrightTimeout:
                    raise _CutOff(browser_cut_off(f"it was still loading after {limit}")) from None
                except PlaywrightError as exc:
                    raise BrowseFailed(browser_failed(_first_line(exc), self._refusals(tab))) from None
            except BrowseFailed as exc:
                if isinstance(exc, _CutOff) or not _alive(tab):
                    await self._drop(chat)
                else:
                    self._arm(chat, tab)
                raise
            notes = [*self._refusals(tab), *await tab.downloads.finished(self.limits.timeout_seconds)]
            # A window is handed over once it has an address, which may be after the action ended: the next one says so.
            if tab.unreported:
                opened = f" (for {', '.join(tab.popup_urls)}: browser_navigate there to follow)" if tab.popup_urls else ""
                notes.append(f"closed {tab.unreported} window(s) the page opened{opened}")
                tab.unreported = 0
                tab.popup_urls.clear()
            self._arm(chat, tab)
            return result, tuple(notes)

    async def _open(self, chat: str) -> _Tab:
        gateway = self._gateway()
        proxy = await gateway.start()
        try:
            context = await self.chromium.new_context(
                viewport={"width": self.limits.width, "height": self.limits.height},
                proxy={"server": proxy},
                service_workers="block",
                accept_downloads=True,
                java_script_enabled=True,
            )
        except ChromiumOff as exc:
            await gateway.aclose()
            raise BrowseFailed(browser_off(str(exc))) from exc
        tab = _Tab(context, gateway, Downloads(self.limits.download_max_bytes))
        context.on("page", lambda page: self._opened(tab, page))
        try:
            await context.add_init_script(_NO_WEBRTC)
            tab.page = await context.new_page()
        except Exception:
            await _close_quietly(context)
            await gateway.aclose()
            raise
        tab.page.on("download", tab.downloads.started)
        self._tabs[chat] = tab
        return tab

    def _opened(self, tab: _Tab, page: Page) -> None:
        """Any window but the chat's own page is a popup: closed at once, and counted."""
        if tab.page is None or page is tab.page:
            return
        tab.popups += 1
        tab.unreported += 1
        # Playwright hands the window over once it has its first address: a link's target, window.open's argument.
        if page.url.startswith(("http://", "https://")) and len(tab.popup_urls) < 3:
            tab.popup_urls.append(page.url[:300])
        closing = asyncio.ensure_future(_close_quietly(page))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)
        if tab.popups > self.limits.max_popups:
            tab.tripped.set()

    def _refusals(self, tab: _Tab) -> list[str]:
        """The requests the proxy refused since the last look (at most ten named)."""
        refused = tab.gateway.refused[:10]
        tab.gateway.refused.clear()
        return [f"blocked {line}" for line in refused]

    def _lock(self, chat: str) -> asyncio.Lock:
        return self._locks.setdefault(chat, asyncio.Lock())

    def _arm(self, chat: str, tab: _Tab) -> None:
        self._disarm(tab)
        loop = asyncio.get_running_loop()
        tab.timer = loop.call_later(self.limits.idle_seconds, lambda: self._idle(chat, tab))

    def _disarm(self, tab: _Tab) -> None:
        if tab.timer is not None:
            tab.timer.cancel()
            tab.timer = None

    def _idle(self, chat: str, tab: _Tab) -> None:
        task = asyncio.get_running_loop().create_task(self._close_idle(chat, tab))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_idle(self, chat: str, tab: _Tab) -> None:
        async with self._lock(chat):
            if self._tabs.get(chat) is tab and tab.timer is not None:
                log.info("browser page of %s idle for %.0f s: closing it", chat, self.limits.idle_seconds)
                await self._drop(chat)

    async def _drop(self, chat: str) -> None:
        tab = self._tabs.pop(chat, None)
        if tab is None:
            return
        self._disarm(tab)
        tab.downloads.cancel()
        await _close_quietly(tab.context)
        await tab.gateway.aclose()

    async def _on_element(self, action: Awaitable[None]) -> None:
        """An element action; waiting for an element that never comes is a plain failure, the page stays open."""
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        try:
            await action
        except PlaywrightTimeout:
            raise BrowseFailed(browser_failed(f"no such element appeared within {self.limits.element_seconds:g} s")) from None

    @staticmethod
    def _ms(seconds: float) -> float:
        return seconds * 1000


def _page(tab: _Tab) -> Page:
    assert tab.page is not None
    return tab.page


def _alive(tab: _Tab) -> bool:
    return tab.page is not None and not tab.page.is_closed()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


async def _close_quietly(target: BrowserContext | Page) -> None:
    try:
        await target.close()
    except Exception as exc:  # the browser may already be gone: nothing left to close
        log.debug("browser: close: %s", exc)
