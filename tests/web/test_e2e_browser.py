"""The browser through a whole turn: the owner asks for a local page (allowed by BICAMERAL_WEB_ALLOW_HOSTS), the
model opens it, reads the text its script wrote, and a screenshot arrives at the fake Telegram as a photo."""

from __future__ import annotations

import pytest

from bicameral.browser.chromium import Chromium
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall
from tests.render import png

pytestmark = pytest.mark.skipif(bool(Chromium().why_off()), reason=Chromium().why_off() or "")

PAGE = """<!doctype html><title>Opening hours</title><body><p id="hours">…</p>
<script>document.getElementById('hours').textContent = 'The harbour museum opens at nine on Sundays.';</script>"""


async def test_the_owner_gets_a_page_read_and_a_screenshot_of_it(site, telegram, models, start_bot):
    site.serve("/hours.html", PAGE.encode(), "text/html; charset=utf-8")
    url = site.url("/hours.html", host="127.0.0.1")
    models.script(
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": url})]),
        Reply(tool_calls=[ToolCall("browser_read", {})]),
        Reply(tool_calls=[ToolCall("browser_screenshot", {})]),
        Reply(text="It opens at nine on Sundays."),
        model="back",
    )
    await start_bot(mode="single", web_allow_hosts="127.0.0.1")
    telegram.user_sends(OWNER, f"when does the museum open on Sundays? see {url}")
    sent = await telegram.await_sent(OWNER, 2, timeout=60)
    assert [m["method"] for m in sent] == ["sendPhoto", "sendMessage"]
    assert png.size(sent[0]["file_bytes"]) == (1280, 800)
    requests = models.requests_for("back")
    opened = requests[1].tool_results()[0]
    assert not opened["is_error"] and "title: Opening hours" in opened["content"], opened
    read = requests[2].tool_results()[0]
    assert "The harbour museum opens at nine on Sundays." in read["content"]
    assert read["content"].startswith(f'<untrusted_content source="{url}">')
    assert [path for path, _ in site.seen if path != "/favicon.ico"] == ["/hours.html"]
