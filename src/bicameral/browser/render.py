"""`Renderer`: HTML or LaTeX to a PNG in the warm Chromium, with every network request refused and the page bounded."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from bicameral.browser.chromium import Chromium, ChromiumOff
from bicameral.errors import BicameralError
from bicameral.failures import render_cut_off

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Route, WebSocketRoute

log = logging.getLogger(__name__)

KATEX_VERSION = "0.16.47"
# The page's own address: nothing is ever fetched from it, our route answers for it from memory.
ORIGIN = "https://render.invalid"
# A proxy that is never there: whatever might slip past the route (a socket the route does not see) goes nowhere.
_DEAD_PROXY = "http://127.0.0.1:9"
_HEAD = f'<!doctype html><meta charset="utf-8"><link rel="stylesheet" href="{ORIGIN}/house.css">'
_PAGE_HEIGHT = "Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)"
_TYPES = {".css": "text/css", ".js": "text/javascript", ".woff2": "font/woff2"}


class RenderFailed(BicameralError):
    """A render that was cut off or could not run; the message is the sentence for the model."""


@dataclass(frozen=True)
class RenderLimits:
    """How long a render may take, how tall its picture may be (CSS pixels, at `scale`), how many windows it may open."""

    timeout_seconds: float = 20.0
    max_height: int = 3500
    scale: float = 2.0
    max_popups: int = 5


@dataclass(frozen=True)
class Rendered:
    """A PNG, its size in pixels, whether it was cut at the maximum height, and what the probe read from the page."""

    png: bytes
    width: int
    height: int
    clipped: bool
    probe: Any = None


def asset(name: str) -> bytes | None:
    """A bundled file the page may load (`house.css`, `katex/...`), or None for anything else."""
    parts = [part for part in name.split("/") if part]
    if not parts or any(part.startswith(".") for part in parts) or PurePosixPath(parts[-1]).suffix not in _TYPES:
        return None
    if parts != ["house.css"] and parts[0] != "katex":
        return None
    try:
        return resources.files("bicameral.browser").joinpath(*parts).read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def latex_page(latex: str, *, display: bool) -> str:
    """A page that typesets `latex` with the bundled KaTeX into #math, or writes KaTeX's error into #latex-error."""
    # As JSON inside a script element; `<` escaped so no `</script>` in the formula can end the element.
    source = json.dumps({"latex": latex, "display": display}).replace("<", "\\u003c")
    return (
        f'{_HEAD}<link rel="stylesheet" href="{ORIGIN}/katex/katex.min.css">'
        f'<script src="{ORIGIN}/katex/katex.min.js"></script>'
        '<body class="latex"><div id="math"></div><pre id="latex-error" hidden></pre>'
        f'<script type="application/json" id="source">{source}</script>'
        "<script>const s = JSON.parse(document.getElementById('source').textContent);"
        "try { katex.render(s.latex, document.getElementById('math'), {displayMode: s.display, throwOnError: true,"
        " trust: false, maxSize: 50, maxExpand: 1000, strict: 'ignore'}); }"
        "catch (e) { document.getElementById('math').remove();"
        " document.getElementById('latex-error').textContent = String(e && e.message || e); }</script>"
    )


# What render_latex reads back: KaTeX's error, if it had one.
LATEX_ERROR_PROBE = "document.getElementById('latex-error') ? document.getElementById('latex-error').textContent : ''"


class Renderer:
    """Renders in its own offline context of the shared Chromium: the page, the house style and KaTeX come from
    memory through a route; every other request (http, https, a private or any other address, websockets) is
    aborted, and the context has no network and a dead proxy besides. A page that is still loading or running at
    the time limit, or opens more than `max_popups` windows, is cut off with a sentence (`RenderFailed`)."""

    def __init__(self, chromium: Chromium, limits: RenderLimits | None = None) -> None:
        self.chromium = chromium
        self.limits = limits or RenderLimits()

    async def html(self, html: str, *, width: int = 800, height: int = 600, probe: str | None = None) -> Rendered:
        """The whole page of `html` (with the house style) at `width` CSS pixels, at least `height` tall."""
        return await self._render(_HEAD + html, width=width, height=height, selector=None, probe=probe)

    async def latex(self, latex: str, *, display: bool = True, probe: str | None = None) -> Rendered:
        """The formula typeset by KaTeX, cropped to it; `probe` defaults to reading KaTeX's error."""
        page = latex_page(latex, display=display)
        return await self._render(page, width=1000, height=200, selector="#math", probe=probe or LATEX_ERROR_PROBE)

    async def _render(self, page_html: str, *, width: int, height: int, selector: str | None, probe: str | None) -> Rendered:
        context = await self.chromium.new_context(
            viewport={"width": width, "height": height},
            device_scale_factor=self.limits.scale,
            offline=True,
            proxy={"server": _DEAD_PROXY},
            service_workers="block",
            accept_downloads=False,
            java_script_enabled=True,
        )
        tripped = asyncio.Event()
        pages: list[Page] = []
        closing: list[asyncio.Future[None]] = []

        def opened(page: Page) -> None:
            pages.append(page)
            if len(pages) > 1:  # the first is ours; every other is a popup, closed at once
                closing.append(asyncio.ensure_future(_close_quietly(page)))
                if len(pages) - 1 > self.limits.max_popups:
                    tripped.set()

        context.on("page", opened)
        try:
            await _serve(context, page_html)
            shoot = asyncio.ensure_future(self._shoot(context, selector=selector, probe=probe))
            stop = asyncio.ensure_future(tripped.wait())
            done, _ = await asyncio.wait({shoot, stop}, timeout=self.limits.timeout_seconds, return_when="FIRST_COMPLETED")
            for task in (shoot, stop):
                task.cancel()
            if shoot in done:
                return shoot.result()
            if stop in done:
                raise RenderFailed(render_cut_off(f"it opened more than {self.limits.max_popups} windows"))
            raise RenderFailed(render_cut_off(f"it was still loading or running after {self.limits.timeout_seconds:g} s"))
        except ChromiumOff as exc:
            raise RenderFailed(str(exc)) from exc
        finally:
            await _close_quietly(context)

    async def _shoot(self, context: BrowserContext, *, selector: str | None, probe: str | None) -> Rendered:
        from playwright.async_api import Error as PlaywrightError

        page = await context.new_page()
        try:
            await page.goto(f"{ORIGIN}/page.html", wait_until="load")
            await page.evaluate("document.fonts.ready.then(() => true)")
            found = await page.evaluate(probe) if probe else None
            if selector is not None:
                element = await page.query_selector(selector)
                if element is None:
                    return Rendered(png=b"", width=0, height=0, clipped=False, probe=found)
                png = await element.screenshot(type="png", animations="disabled")
                box = await element.bounding_box() or {"width": 0, "height": 0}
                return Rendered(png, int(box["width"] * self.limits.scale), int(box["height"] * self.limits.scale), False, found)
            full = await page.evaluate(_PAGE_HEIGHT)
            viewport = page.viewport_size or {"width": 800, "height": 600}
            shown = max(1, min(int(full), self.limits.max_height))
            clip = {"x": 0, "y": 0, "width": viewport["width"], "height": max(shown, 1)}
            png = await page.screenshot(type="png", full_page=True, clip=clip, animations="disabled")  # type: ignore[arg-type]
        except PlaywrightError as exc:
            raise RenderFailed(render_cut_off(f"the browser gave up on the page ({str(exc).splitlines()[0][:200]})")) from exc
        scale = self.limits.scale
        return Rendered(png, int(viewport["width"] * scale), int(shown * scale), int(full) > self.limits.max_height, found)


async def _serve(context: BrowserContext, page_html: str) -> None:
    """Answer our own page (once: a page that reloads itself gets nothing more) and assets; abort everything else."""
    served = False

    async def route(route: Route) -> None:
        nonlocal served
        url = route.request.url
        body: bytes | None = None
        if url == f"{ORIGIN}/page.html" and not served:
            served, body = True, page_html.encode("utf-8")
        elif url.startswith(f"{ORIGIN}/") and "?" not in url and "#" not in url:
            body = asset(url.removeprefix(f"{ORIGIN}/"))
        if body is None:
            log.debug("render: refused %s", url[:200])
            await route.abort("blockedbyclient")
            return
        kind = "text/html" if url.endswith("/page.html") else _TYPES.get("." + url.rpartition(".")[2], "application/octet-stream")
        await route.fulfill(status=200, body=body, content_type=kind)

    await context.route("**/*", route)
    # WebSockets are not requests the route sees: refuse them on their own.
    await context.route_web_socket("**/*", _refuse_socket)


async def _refuse_socket(socket: WebSocketRoute) -> None:
    await socket.close()


async def _close_quietly(target: BrowserContext | Page) -> None:
    try:
        await target.close()
    except Exception as exc:  # the browser may already be gone: nothing left to close
        log.debug("render: close: %s", exc)
