"""The dashboard in a real browser (Playwright driving Debian's Chromium): the owner's link logs in, and a turn shows
on the live page as it happens, with no reload; the chat panel talks to the assistant as the owner; a browser without
the cookie sees nothing; a reply shows in the panel while it is written, then the reply takes its place."""

from __future__ import annotations

import logging
import os
import re
import threading

import pytest

from bicameral.browser.chromium import DEFAULT_CHROMIUM, Chromium
from tests.conftest import OWNER
from tests.e2e.test_dashboard import login_link
from tests.fakes.model_server import Reply, ToolCall
from tests.support.chat import eventually


@pytest.fixture
async def browser(caplog):
    caplog.set_level(logging.INFO, logger="bicameral.tx")
    if why := Chromium(DEFAULT_CHROMIUM).why_off():
        pytest.skip(why)
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        launched = await playwright.chromium.launch(executable_path=str(DEFAULT_CHROMIUM), headless=True, args=args)
        yield launched
        await launched.close()


async def test_the_owner_logs_in_with_the_link_and_sees_a_turn_appear_live(telegram, models, start_bot, browser):
    hold = threading.Event()
    models.script(Reply(text="Hello from the assistant"), Reply(text='Web reply <b class="injected">not bold</b>'),
                  Reply(tool_calls=[ToolCall("current_time", {"timezone": "UTC"})]), Reply(text="It is noon.", latency=3),
                  Reply(chunks=["The answer ", "is forty-", "two, surely."], hold=(2, hold)))
    app = await start_bot(dashboard_port=0, progress_note_after_seconds=0.3)
    stranger = await browser.new_page()
    await stranger.goto(app.dashboard.base_url + "/")
    assert "Not logged in" in await stranger.content()
    assert await stranger.query_selector("#live") is None

    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(await login_link(telegram))
    await page.wait_for_url(re.compile(r"/$"))  # the login page moves on to the dashboard by itself
    await page.wait_for_selector("#live")
    cookie = next(c for c in await context.cookies() if c["name"] == "bicameral_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""  # out of reach of scripts
    # Scripts run under the page's Content-Security-Policy (no eval), so the test waits through selectors only.
    await eventually(lambda: app.dashboard.watching == 1, "the page's event stream to connect")

    telegram.user_sends(OWNER, "hello through the dashboard")
    await page.locator("#live", has_text="Hello from the assistant").wait_for(timeout=15_000)
    text = await page.inner_text("#live")
    assert "[RX]" in text and "hello through the dashboard" in text and "[TX]" in text

    # The chat panel: a third channel, the owner's, with the same chamber and commands.
    await page.fill("#say textarea", "and now from the web")
    await page.click("#say button")
    await page.locator("#messages", has_text='Web reply <b class="injected">not bold</b>').wait_for(timeout=15_000)
    assert "and now from the web" in await page.inner_text("#messages")
    assert await page.input_value("#say textarea") == ""  # a fresh box for the next message
    assert await page.query_selector("#messages b.injected") is None  # the reply is text, never markup
    await page.fill("#say textarea", "/health")
    await page.click("#say button")
    await page.locator("#messages", has_text="Health at").wait_for(timeout=15_000)  # an owner command answered

    # A long turn: its progress note is one bubble, taken off the page when the answer comes.
    await page.fill("#say textarea", "what time is it?")
    await page.click("#say button")
    await page.locator("#messages .said", has_text="Still working on it").wait_for(timeout=15_000)
    await page.locator("#messages", has_text="It is noon.").wait_for(timeout=20_000)
    await page.locator("#messages .said", has_text="Still working on it").wait_for(state="detached", timeout=5_000)

    # A reply shows while it is written (the fake model holds the rest back), then the reply takes its place.
    await page.fill("#say textarea", "what is the answer?")
    await page.click("#say button")
    try:
        await page.locator("#messages .said", has_text="The answer is …").wait_for(timeout=15_000)
        assert "surely" not in await page.inner_text("#messages")
    finally:
        hold.set()
    await page.locator("#messages .said", has_text="The answer is forty-two, surely.").wait_for(timeout=15_000)
    await page.locator("#messages .said", has_text="The answer is …").wait_for(state="detached", timeout=5_000)
    assert await page.locator("#messages .said", has_text="The answer is").count() == 1
    await context.close()
