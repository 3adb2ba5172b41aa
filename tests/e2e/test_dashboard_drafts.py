"""Replies shown in the web chat as they are written, over real HTTP: the fake model holds its stream part-way (on an
event, no sleeps) while the page's event stream is read; the draft is there before the reply is complete, the reply
takes its place, and a call that ends in a tool call, fails or is stopped leaves no draft. Telegram gets no drafts."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from bicameral.dashboard.chat import DRAFTING
from tests.conftest import OWNER
from tests.e2e.test_dashboard import _transcript_logged, logged_in  # noqa: F401 (the fixture applies here too)
from tests.fakes.model_server import Reply, ToolCall
from tests.support.chat import eventually

PARTIAL = "The answer is" + DRAFTING  # "The answer is forty-" shown up to its last whole word
FINAL = "The answer is forty-two, surely."


def _chunks() -> list[str]:
    return ["The answer ", "is forty-", "two, surely."]


class Page:
    """A logged-in page: its event stream's `data:` lines of the chat panel, read as they come."""

    def __init__(self, client: httpx.AsyncClient, csrf: str) -> None:
        self.client = client
        self.csrf = csrf
        self.chat: list[str] = []
        self.lines: list[str] = []

    async def say(self, text: str) -> None:
        assert (await self.client.post("/chat", data={"text": text, "csrf": self.csrf})).status_code == 200

    def bubbles(self, text: str) -> list[str]:
        return [line for line in self.chat if text in line]

    def key_of(self, text: str) -> str:
        found = re.search(r'id="said-([^"]+)"', self.bubbles(text)[0])
        assert found, self.bubbles(text)
        return found.group(1)

    def deleted(self, key: str) -> bool:
        return any(f'id="said-{key}" hx-swap-oob="delete"' in line for line in self.chat)


@asynccontextmanager
async def page(app, telegram) -> AsyncIterator[Page]:
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        await logged_in(telegram, client)
        found = re.search(r'name="csrf" value="([^"]+)"', (await client.get("/")).text)
        assert found
        shown = Page(client, found.group(1))

        async def read() -> None:
            async with client.stream("GET", "/events") as stream:
                event = ""
                async for line in stream.aiter_lines():
                    shown.lines.append(line)
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "chat":
                        shown.chat.append(line[6:])

        reading = asyncio.create_task(read())
        await eventually(lambda: any(line.startswith(": connected") for line in shown.lines), "the stream to open")
        try:
            yield shown
        finally:
            reading.cancel()


async def _drafted_then_replaced(shown: Page, hold: threading.Event) -> None:
    await eventually(lambda: shown.bubbles(PARTIAL), "the draft while the reply is still being written", timeout=20)
    assert not shown.bubbles("surely")  # the rest is held back by the model: the draft came first
    key = shown.key_of(PARTIAL)
    hold.set()
    await eventually(lambda: shown.bubbles(FINAL), "the reply", timeout=20)
    [reply] = shown.bubbles(FINAL)  # once
    assert f'id="said-{key}"' in reply and DRAFTING not in reply and "hx-swap-oob" not in reply
    # The draft left just before its reply came under the same id, so the page ends with the reply alone.
    assert shown.chat.index(reply) == shown.chat.index(f'<div id="said-{key}" hx-swap-oob="delete"></div>') + 1


async def test_single_mode_shows_the_reply_as_it_is_written_and_the_reply_takes_its_place(telegram, models,
                                                                                         start_bot):
    hold = threading.Event()
    models.script(Reply(chunks=_chunks(), hold=(2, hold)))
    app = await start_bot(dashboard_port=0)
    try:
        async with page(app, telegram) as shown:
            await shown.say("what is the answer?")
            await _drafted_then_replaced(shown, hold)
    finally:
        hold.set()
    assert app.stores.messages.recent_since("web:owner", 0, 10)[-1]["text"] == FINAL  # the reply kept, not a draft
    assert not any("[TX]" in line and DRAFTING in line for line in shown.lines)  # drafts are not logged as sent


async def test_bicameral_mode_shows_the_front_reply_as_it_is_written(telegram, models, start_bot):
    hold = threading.Event()
    models.script(Reply(chunks=_chunks(), hold=(2, hold)), model="front")
    app = await start_bot(dashboard_port=0, mode="bicameral", delivery_pause_scale=0)
    try:
        async with page(app, telegram) as shown:
            await shown.say("what is the answer?")
            await _drafted_then_replaced(shown, hold)
    finally:
        hold.set()


async def test_text_before_a_tool_call_is_taken_away_and_a_turn_without_a_reply_leaves_no_draft(telegram, models,
                                                                                                start_bot):
    hold = threading.Event()
    models.script(
        Reply(chunks=["Checking the ", "clock now."], tool_calls=[ToolCall("current_time", {"timezone": "UTC"})],
              hold=(1, hold)),
        Reply(text=""),  # nothing to say after the tool: no reply at all
    )
    app = await start_bot(dashboard_port=0)
    try:
        async with page(app, telegram) as shown:
            await shown.say("what time is it?")
            await eventually(lambda: shown.bubbles("Checking the" + DRAFTING), "the first call's text", timeout=20)
            key = shown.key_of("Checking the" + DRAFTING)
            hold.set()
            await eventually(lambda: shown.deleted(key), "the draft taken away", timeout=20)
            await models.await_completed(2, timeout=20)
            assert not [line for line in shown.chat if "clock now" in line]  # never shown as said
    finally:
        hold.set()


async def test_a_failed_or_stopped_call_leaves_no_draft(telegram, models, start_bot):
    hold, fail = threading.Event(), threading.Event()
    models.script(Reply(chunks=_chunks(), hold=(2, hold)))
    app = await start_bot(dashboard_port=0)
    try:
        async with page(app, telegram) as shown:
            await shown.say("what is the answer?")
            await eventually(lambda: shown.bubbles(PARTIAL), "the draft", timeout=20)
            key = shown.key_of(PARTIAL)
            await shown.say("/stop")
            await eventually(lambda: shown.deleted(key), "the stopped turn's draft taken away", timeout=20)
            hold.set()
            # A call that fails part-way: its draft goes too, and the failure is said in a bubble of its own.
            models.script(Reply(chunks=_chunks(), hold=(2, fail), error_after_events=3))
            await shown.say("try again")
            await eventually(lambda: len(shown.bubbles(PARTIAL)) == 2, "the second draft", timeout=20)
            second = re.search(r'id="said-([^"]+)"', shown.bubbles(PARTIAL)[1])
            assert second
            fail.set()
            await eventually(lambda: shown.deleted(second.group(1)), "the failed call's draft taken away", timeout=20)
            assert not shown.bubbles(FINAL)
    finally:
        hold.set()
        fail.set()


async def test_telegram_gets_no_drafts_and_one_message(telegram, models, start_bot):
    hold = threading.Event()
    models.script(Reply(chunks=_chunks(), hold=(2, hold)))
    app = await start_bot(dashboard_port=0)
    try:
        async with page(app, telegram) as shown:
            before = len(telegram.sent_messages(OWNER))  # the login link
            telegram.user_sends(OWNER, "what is the answer?")
            request = (await models.await_requests(1, timeout=20))[0]
            await eventually(lambda: len(request.events) >= 3, "the reply held part-way", timeout=20)
            hold.set()
            sent = (await telegram.await_sent(OWNER, before + 1))[before:]
            await models.await_completed(1, timeout=20)
    finally:
        hold.set()
    assert [m["text"] for m in sent] == [FINAL]
    assert not telegram.calls_to("editMessageText") and not telegram.calls_to("deleteMessage")
    assert not shown.chat  # the web chat shows another channel's replies only in the live turns
