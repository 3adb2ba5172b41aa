"""Offline mode in the running app: with the local model configured, `bicameral chat` remembers, reminds, reads a
page and recalls through the real tools and the registry, and leaves everything else to the model, which sees
what was noted. The model here is a stand-in that records what it is asked (the real one cannot be steered)."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel
from rich.console import Console

from bicameral.app import App
from bicameral.channels.terminal import CHAT, TerminalChannel
from bicameral.config import Settings
from bicameral.models.base import Message, ModelEvent, Stop, TextBlock, TextDelta, ToolSpec, Usage
from bicameral.offline import OfflineChamber
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.web import untrusted
from tests.support.chat import eventually

REPLY_TIMEOUT = 20.0
PERSON = "terminal:local"
ZONE = "Asia/Tokyo"
# Wednesday 10 June 2026, 12:00 in Tokyo.
START = datetime(2026, 6, 10, 12, 0, tzinfo=ZoneInfo(ZONE)).timestamp()
SMALL_TALK = "Nice to hear from you."


class RecordingModel:
    """Answers every call with the same words and keeps what it was shown."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[list[Message]] = []

    async def aclose(self) -> None:
        pass

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        self.calls.append(list(messages))
        yield TextDelta(SMALL_TALK)
        yield Usage()
        yield Stop("end_turn")

    def last_user_text(self) -> str:
        return "\n".join(b.text for b in self.calls[-1][-1].content if isinstance(b, TextBlock))

    def history_text(self) -> str:
        return "\n".join(b.text for m in self.calls[-1] for b in m.content if isinstance(b, TextBlock))


class _Url(BaseModel):
    url: str


class PageFetch(Tool[_Url]):
    """web_fetch without the network: one page, wrapped as the real tool wraps it."""

    name = "web_fetch"
    description = "fetch a page"
    args_model = _Url
    owner_only = False

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def run(self, args: _Url, ctx: ToolContext) -> ToolResult:
        self.asked.append(args.url)
        return ToolResult(untrusted(args.url, "# Tide tables\n\nHigh water at 06:12 and 18:40.\n\n" + "Detail. " * 300))


class Session:
    def __init__(self, app: App, model: RecordingModel, pages: PageFetch, keyboard: int) -> None:
        self.app, self.model, self.pages, self._keyboard = app, model, pages, keyboard

    def type(self, *lines: str) -> None:
        os.write(self._keyboard, "".join(line + "\n" for line in lines).encode())

    async def ask(self, text: str, replies: int = 1) -> list[str]:
        """Type a line; the replies it got, once delivered."""
        before = len(self._replies())
        self.type(text)
        return await self.replies_after(before, replies)

    async def replies_after(self, before: int, count: int) -> list[str]:
        await eventually(lambda: len(self._replies()) >= before + count, f"{count} reply(ies)", timeout=REPLY_TIMEOUT)
        return self._replies()[before:]

    def _replies(self) -> list[str]:
        return [row["text"] for row in self.app.stores.messages.recent(CHAT, 200) if row["direction"] == "out"]

    def tools_run(self) -> list[str]:
        return [row["name"] for row in reversed(self.app.stores.tool_calls.recent(50, chat=CHAT))]


async def _session(tmp_path: Path, **settings: Any) -> AsyncIterator[Session]:
    values: dict[str, Any] = dict(back_model="local", front_model="local", mode="single", debounce_ms=0)
    values.update(settings)
    config = Settings.for_test(tmp_path, **values)
    read_end, keyboard = os.pipe()
    stdin = os.fdopen(read_end, "r")
    terminal = TerminalChannel(stdin=stdin, console=Console(file=io.StringIO(), width=200))
    model, pages = RecordingModel(), PageFetch()
    started = time.monotonic()
    try:
        async with App(
            config, [terminal], back_model=model, extra_tools=[pages], clock=lambda: START + time.monotonic() - started
        ) as app:
            app.stores.schedules.set_timezone(PERSON, ZONE)
            yield Session(app, model, pages, keyboard)
    finally:
        os.close(keyboard)
        stdin.close()


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[Session]:
    async for made in _session(tmp_path):
        yield made


async def test_the_local_model_is_fronted_by_the_rules(session: Session) -> None:
    assert isinstance(session.app.handler, OfflineChamber)


async def test_a_fact_is_noted_and_recalled_by_the_tools_alone(session: Session) -> None:
    assert await session.ask("remember that my locker at the gym is number 112") == [
        "Noted: your locker at the gym is number 112"
    ]
    assert await session.ask("what did I tell you about the gym locker?") == [
        "From my notes: your locker at the gym is number 112"
    ]
    assert session.model.calls == []
    assert session.tools_run() == ["remember", "recall"]  # through the registry, so audited
    kept = session.app.stores.memory.recall("locker", (f"user:{PERSON}",))
    assert [f.text for f in kept] == ["my locker at the gym is number 112"]


async def test_nothing_noted_is_said_so_when_asked_outright(session: Session) -> None:
    assert await session.ask("do you remember my bank's sort code?") == ["I have nothing noted about your bank's sort code."]
    assert session.model.calls == []


async def test_a_reminder_is_set_on_the_persons_clock_and_confirmed(session: Session) -> None:
    [reply] = await session.ask("remind me tomorrow at 8 to water the tomatoes")
    assert reply == "I'll remind you on Thu 11 Jun at 08:00 (Asia/Tokyo): water the tomatoes"
    [schedule] = session.app.stores.schedules.live(CHAT)
    assert schedule.body == "water the tomatoes" and schedule.tz == ZONE and schedule.cron is None
    assert schedule.next_due == datetime(2026, 6, 11, 8, 0, tzinfo=ZoneInfo(ZONE)).timestamp()
    assert session.model.calls == []


async def test_a_reminder_in_minutes_counts_from_the_injected_clock(session: Session) -> None:
    [reply] = await session.ask("remind me in 45 minutes to take the bread out")
    assert reply == "I'll remind you on Wed 10 Jun at 12:45 (Asia/Tokyo): take the bread out"
    [schedule] = session.app.stores.schedules.live(CHAT)
    assert schedule.next_due is not None and abs(schedule.next_due - (START + 45 * 60)) < 5


async def test_a_reminder_without_a_time_asks_for_one_and_sets_nothing(session: Session) -> None:
    [reply] = await session.ask("remind me to renew my bike insurance")
    assert reply.startswith("When should I remind you?") and "renew my bike insurance" in reply
    assert session.app.stores.schedules.live(CHAT) == []


async def test_a_page_is_read_and_its_opening_shown(session: Session) -> None:
    [reply] = await session.ask("what does tides.example.org/brest say?")
    assert session.pages.asked == ["https://tides.example.org/brest"]
    assert reply.startswith("From https://tides.example.org/brest:\n\n# Tide tables\n\nHigh water at 06:12 and 18:40.")
    assert len(reply) < 1100 and "more characters" in reply
    assert session.model.calls == []


async def test_small_talk_goes_to_the_model_with_the_notes_and_the_exchange(session: Session) -> None:
    await session.ask("note that my sister Ines lives in Porto")
    assert await session.ask("how's your day going?") == [SMALL_TALK]
    assert len(session.model.calls) == 1
    assert "how's your day going?" in session.model.last_user_text()
    history = session.model.history_text()
    assert "my sister Ines lives in Porto" in history  # the memory note
    assert "Noted: your sister Ines lives in Porto" in history  # the exchange, kept in the session


async def test_a_question_no_note_answers_is_left_to_the_model(session: Session) -> None:
    assert await session.ask("what's my favourite season?") == [SMALL_TALK]
    assert session.tools_run() == ["recall"]


async def test_a_burst_is_split_between_the_rules_and_the_model(tmp_path: Path) -> None:
    async for session in _session(tmp_path, debounce_ms=400):
        session.type("remember that the spare bulbs are in the hall cupboard", "and how are you today?")
        replies = await session.replies_after(0, 2)
        assert replies == ["Noted: the spare bulbs are in the hall cupboard", SMALL_TALK]
        asked = session.model.last_user_text()
        assert "how are you today?" in asked and "spare bulbs" not in asked.split("</memory>")[-1]


async def test_the_audit_keeps_the_calls_arguments(session: Session) -> None:
    await session.ask("remind me in 2 hours to call the garage")
    [row] = session.app.stores.tool_calls.recent(1, chat=CHAT)
    assert row["name"] == "schedule_create"
    assert json.loads(row["args"]) == {"text": "call the garage", "timezone": ZONE, "in_minutes": pytest.approx(120, abs=0.1)}


async def test_in_a_group_a_fact_is_kept_with_who_said_it(telegram, make_settings) -> None:
    from bicameral.app import telegram_config
    from bicameral.channels.telegram import TelegramChannel
    from tests.support.access import write_access

    settings = make_settings(back_model="local", front_model="local", debounce_ms=0)
    write_access(settings, policy="open")
    group, model = -100500, RecordingModel()
    async with App(settings, [TelegramChannel(telegram_config(settings))], back_model=model):
        telegram.user_sends(group, "@bicameral_test_bot remember that my train gets in at 18:05", user_id=2201,
                            first_name="Ana", chat_type="supergroup", chat_title="Trip")
        assert [m["text"] for m in await telegram.await_sent(group, 1)] == ["Noted: Ana: my train gets in at 18:05"]
        telegram.user_sends(group, "@bicameral_test_bot did I tell you about the train?", user_id=2202,
                            first_name="Ben", chat_type="supergroup", chat_title="Trip")
        sent = await telegram.await_sent(group, 2)
        assert sent[1]["text"] == "From my notes: Ana: my train gets in at 18:05"  # read back as said, never "your"
    assert model.calls == []
