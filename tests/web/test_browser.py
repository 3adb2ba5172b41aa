"""The browser tools in the real Chromium against local servers: a page that needs JavaScript is read, clicked, typed
into, screenshotted and left; every request it makes keeps web_fetch's address rules; hostile pages are cut off."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bicameral.app.configs import browser_for
from bicameral.browser.chromium import DEFAULT_CHROMIUM, Chromium
from bicameral.browser.session import BrowserLimits
from bicameral.config import Settings
from bicameral.events import Action, ActionResult, Authority, Role, SendFile
from bicameral.tools.base import ToolContext, ToolResult
from bicameral.tools.browser import (
    Browser,
    BrowserBack,
    BrowserClick,
    BrowserNavigate,
    BrowserRead,
    BrowserScreenshot,
    BrowserType,
    ClickArgs,
    NavigateArgs,
    NoArgs,
    TypeArgs,
)
from tests.render import png
from tests.support.chat import eventually
from tests.web.conftest import Site, serve_site

pytestmark = pytest.mark.skipif(bool(Chromium().why_off()), reason=Chromium().why_off() or "")

SHOWN = "The Nordholm lighthouse was first lit in 1874, and this sentence is written by the page's script."
APP = f"""<!doctype html><html><head><title>Lighthouse app</title></head><body>
<main><h1 id="heading">Loading…</h1><p id="fact"></p>
<form id="search"><input id="q" name="q"><button type="submit">Search</button></form>
<p id="answer"></p><button id="more" onclick="document.getElementById('answer').textContent = 'More: the tower is 30 m tall.'">
Show more</button><a href="/second.html">Second page</a></main>
<script>
document.getElementById('heading').textContent = 'Nordholm';
document.getElementById('fact').textContent = {SHOWN!r};
document.getElementById('search').addEventListener('submit', (event) => {{
  event.preventDefault();
  document.getElementById('answer').textContent = 'You searched for ' + document.getElementById('q').value;
}});
</script></body></html>"""
SECOND = "<!doctype html><title>Second</title><body><p>The second page, plain.</p></body>"


@pytest.fixture
def other_site() -> Iterator[Site]:
    """A server on 127.0.0.2: loopback, but not the address the owner allowed."""
    yield from serve_site("127.0.0.2")


class Chat:
    """One chat's tool context, with the files it was sent."""

    def __init__(self, data_dir: Path, chat: str = "telegram:1") -> None:
        self.sent: list[SendFile] = []

        async def perform(action: Action) -> ActionResult:
            if isinstance(action, SendFile):
                self.sent.append(action)
            return ActionResult(ok=True, message_ids=["m1"])

        self.ctx = ToolContext(chat=chat, turn_id="t1", data_dir=data_dir, perform=perform, authority=Authority(Role.OWNER))


@pytest.fixture
async def chromium() -> AsyncIterator[Chromium]:
    browser = Chromium(DEFAULT_CHROMIUM)
    yield browser
    await browser.aclose()


def _browser(tmp_path: Path, chromium: Chromium, allow: str = "127.0.0.1", **limits: float) -> Browser:
    """The browser as the app builds it from the settings, on the test's Chromium."""
    settings = Settings.for_test(tmp_path, web_allow_hosts=allow)
    return browser_for(settings, chromium, BrowserLimits(**limits))  # type: ignore[arg-type]


async def _go(browser: Browser, chat: Chat, url: str) -> ToolResult:
    return await BrowserNavigate(browser).run(NavigateArgs(url=url), chat.ctx)


async def test_a_page_that_needs_javascript_is_read_clicked_typed_into_screenshotted_and_left(site, chromium, tmp_path):
    site.serve("/app.html", APP.encode(), "text/html; charset=utf-8")
    site.serve("/second.html", SECOND.encode(), "text/html")
    browser, chat = _browser(tmp_path, chromium), Chat(tmp_path)
    url = site.url("/app.html", host="127.0.0.1")
    opened = await _go(browser, chat, url)
    assert not opened.is_error, opened.content
    assert f"opened {url} (HTTP 200)" in opened.content and "title: Lighthouse app" in opened.content
    assert opened.content.startswith(f'<untrusted_content source="{url}">')

    read = await BrowserRead(browser).run(NoArgs(), chat.ctx)
    assert SHOWN in read.content and "Nordholm" in read.content and "Loading" not in read.content
    assert read.content.startswith(f'<untrusted_content source="{url}">') and read.content.endswith("</untrusted_content>")

    clicked = await BrowserClick(browser).run(ClickArgs(text="Show more"), chat.ctx)
    assert not clicked.is_error, clicked.content
    typed = await BrowserType(browser).run(TypeArgs(selector="#q", text="keepers", submit=True), chat.ctx)
    assert not typed.is_error, typed.content
    read = await BrowserRead(browser).run(NoArgs(), chat.ctx)
    assert "You searched for keepers" in read.content
    # The answer replaced the click's text: both happened, in order, on the page the script built.
    missing = await BrowserClick(browser).run(ClickArgs(selector="#no-such-thing"), chat.ctx)
    assert missing.is_error and "no such element appeared" in missing.content

    shot = await BrowserScreenshot(browser).run(NoArgs(), chat.ctx)
    assert not shot.is_error, shot.content
    [photo] = chat.sent
    assert photo.kind == "photo"
    picture = (tmp_path / photo.path).read_bytes()
    assert png.size(picture) == (1280, 800) and len(png.colours(picture)) > 10

    moved = await BrowserClick(browser).run(ClickArgs(text="Second page"), chat.ctx)
    assert site.url("/second.html", host="127.0.0.1") in moved.content and "title: Second" in moved.content
    back = await BrowserBack(browser).run(NoArgs(), chat.ctx)
    assert f"went back to {url}" in back.content
    await browser.aclose()


async def test_a_page_the_owner_did_not_allow_is_refused_without_a_request(site, chromium, tmp_path):
    browser, chat = _browser(tmp_path, chromium, allow=""), Chat(tmp_path)
    refused = await _go(browser, chat, site.url("/page.html", host="127.0.0.1"))
    assert refused.is_error and "I couldn't open" in refused.content and "loopback" in refused.content
    for url, reason in [
        ("file:///etc/passwd", "only http and https"),
        ("data:text/html,<p>hi</p>", "only http and https"),
        ("chrome://version", "only http and https"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ]:
        result = await _go(browser, chat, url)
        assert result.is_error and reason in result.content, (url, result.content)
    assert site.seen == []
    assert chromium.launches == 0  # nothing was opened at all
    await browser.aclose()


async def test_subresources_and_redirects_to_private_addresses_never_reach_them(site, other_site, chromium, tmp_path):
    private = other_site.url("/notes.txt", host="127.0.0.2")
    tunnelled = f"https://127.0.0.2:{other_site.port}/picture.png"  # asked of the proxy as a CONNECT
    embeds_page = f'<title>Embeds</title><img src="{private}"><script src="{private}"></script><img src="{tunnelled}">'
    site.serve("/embeds.html", embeds_page.encode(), "text/html")
    browser, chat = _browser(tmp_path, chromium), Chat(tmp_path)
    embeds = await _go(browser, chat, site.url("/embeds.html", host="127.0.0.1"))
    assert not embeds.is_error and f"blocked {private}" in embeds.content and "loopback" in embeds.content
    assert f"blocked 127.0.0.2:{other_site.port}: 127.0.0.2 is a loopback address" in embeds.content
    redirected = await _go(browser, chat, site.url(f"/go?{private}", host="127.0.0.1"))
    assert f"blocked {private}" in redirected.content, redirected.content
    socket = f"ws://127.0.0.2:{other_site.port}/socket"
    site.serve("/socket.html", f"<title>Socket</title><script>new WebSocket({socket!r})</script>".encode(), "text/html")
    opened = await _go(browser, chat, site.url("/socket.html", host="127.0.0.1"))
    assert not opened.is_error, opened.content
    assert other_site.seen == []
    await browser.aclose()


async def test_a_page_that_never_finishes_loading_is_cut_off(site, chromium, tmp_path):
    browser, chat = _browser(tmp_path, chromium, timeout_seconds=2), Chat(tmp_path)
    cut = await _go(browser, chat, site.url("/slow", host="127.0.0.1"))
    assert cut.is_error and "I stopped the page: it was still loading after 2 s" in cut.content
    assert not browser.sessions.is_open(chat.ctx.chat)
    gone = await BrowserRead(browser).run(NoArgs(), chat.ctx)
    assert gone.is_error and "no page is open in this chat" in gone.content
    await browser.aclose()


async def test_a_hung_page_holds_only_its_own_chat(site, chromium, tmp_path):
    site.serve("/app.html", APP.encode(), "text/html; charset=utf-8")
    browser = _browser(tmp_path, chromium, timeout_seconds=60)
    stuck, other = Chat(tmp_path, "telegram:1"), Chat(tmp_path, "telegram:2")
    hanging = asyncio.ensure_future(_go(browser, stuck, site.url("/slow", host="127.0.0.1")))
    await eventually(lambda: any(path == "/slow" for path, _ in site.seen), "the slow page was asked for")
    assert not (await _go(browser, other, site.url("/app.html", host="127.0.0.1"))).is_error
    read = await BrowserRead(browser).run(NoArgs(), other.ctx)
    assert SHOWN in read.content
    assert not hanging.done()  # the other chat was served while this one still waited
    hanging.cancel()  # as the registry's timeout would: the stuck page is closed, the other stays
    await eventually(lambda: not browser.sessions.is_open(stuck.ctx.chat), "the cancelled page was closed")
    assert browser.sessions.is_open(other.ctx.chat)
    await browser.aclose()


async def test_a_page_opening_a_hundred_popups_is_cut_off(site, chromium, tmp_path):
    flood = "<title>Flood</title><script>for (let i = 0; i < 100; i++) window.open('about:blank', 'w' + i);</script>"
    site.serve("/flood.html", flood.encode(), "text/html")
    site.serve("/one.html", b"<title>One</title><script>window.open('/notes.txt')</script><p>one popup</p>", "text/html")
    browser, chat = _browser(tmp_path, chromium), Chat(tmp_path)
    one = await _go(browser, chat, site.url("/one.html", host="127.0.0.1"))
    assert not one.is_error, one.content
    note = f"closed 1 window(s) the page opened (for {site.url('/notes.txt', host='127.0.0.1')}: browser_navigate"
    said = [one.content]

    async def reported() -> bool:
        # The window is handed over once it has its address, maybe after the navigation returned: a later action says so.
        if not any(note in content for content in said):
            said.append((await BrowserClick(browser).run(ClickArgs(text="one popup"), chat.ctx)).content)
        return any(note in content for content in said)

    await eventually(reported, "the popup was closed and named")
    cut = await _go(browser, chat, site.url("/flood.html", host="127.0.0.1"))
    assert cut.is_error and "I stopped the page: it opened more than 10 windows" in cut.content
    assert not browser.sessions.is_open(chat.ctx.chat)
    await browser.aclose()


async def test_a_download_lands_in_the_workspace_and_a_big_one_does_not(site, chromium, tmp_path):
    table = b"month,sales\nApril,1204\nMay,1377\n"
    site.serve("/report.csv", table, "text/csv", Content_Disposition='attachment; filename="report.csv"')
    site.serve("/huge.bin", b"x" * 50_000, "application/octet-stream", Content_Disposition='attachment; filename="huge.bin"')
    browser, chat = _browser(tmp_path, chromium, download_max_bytes=10_000), Chat(tmp_path)
    got = await _go(browser, chat, site.url("/report.csv", host="127.0.0.1"))
    assert not got.is_error, got.content
    assert f"downloaded 'report.csv' into the workspace as report.csv ({len(table)} bytes)" in got.content
    assert (tmp_path / "workspaces" / "telegram_1" / "report.csv").read_bytes() == table
    big = await _go(browser, chat, site.url("/huge.bin", host="127.0.0.1"))
    assert "the download 'huge.bin' is 50,000 bytes, over the 10,000-byte limit; not kept" in big.content
    assert not (tmp_path / "workspaces" / "telegram_1" / "huge.bin").exists()
    await browser.aclose()


async def test_an_unused_page_is_closed_after_a_while(site, chromium, tmp_path):
    browser, chat = _browser(tmp_path, chromium, idle_seconds=0.3), Chat(tmp_path)
    assert not (await _go(browser, chat, site.url("/notes.txt", host="127.0.0.1"))).is_error
    await eventually(lambda: not browser.sessions.is_open(chat.ctx.chat), "the idle page was closed")
    await browser.aclose()
