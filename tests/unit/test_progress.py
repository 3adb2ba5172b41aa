"""The progress note of a long turn: shown only after a while, edited in place, taken down at the end."""

from __future__ import annotations

import asyncio

from bicameral.delivery.progress import ProgressNote
from bicameral.events import Action, ActionResult, DeleteMessage, EditText, SendText

CHAT = "telegram:1"


class Channel:
    """Performs actions by recording them; a sent message gets the next id."""

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self.performed = asyncio.Event()

    async def perform(self, action: Action) -> ActionResult:
        self.actions.append(action)
        self.performed.set()
        return ActionResult(ok=True, message_ids=("m1",) if isinstance(action, SendText) else ())


class Timer:
    """A sleep that returns only when the test says the time has come."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.elapsed = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.started.set()
        await self.elapsed.wait()


async def test_a_quick_turn_shows_nothing() -> None:
    channel, timer = Channel(), Timer()
    note = ProgressNote(channel.perform, CHAT, after=15, sleep=timer)
    note.start()
    await timer.started.wait()
    await note.step("current_time()")
    await note.close()
    assert channel.actions == []


async def test_a_long_turn_shows_its_latest_step_then_takes_the_note_down() -> None:
    channel, timer = Channel(), Timer()
    note = ProgressNote(channel.perform, CHAT, after=15, edit_every=0, sleep=timer)
    note.start()
    await note.step("recall(query=diet)")
    timer.elapsed.set()
    await channel.performed.wait()
    await note.step("web_fetch(url=https://example.org)")
    await note.close()
    assert channel.actions == [
        SendText(chat=CHAT, text="Still working on it… step 1: recall(query=diet)", purpose="status"),
        EditText(chat=CHAT, message_id="m1", text="Still working on it… step 2: web_fetch(url=https://example.org)"),
        DeleteMessage(chat=CHAT, message_id="m1"),
    ]


async def test_steps_in_quick_succession_are_one_edit_not_many() -> None:
    channel, timer = Channel(), Timer()
    now = [100.0]
    note = ProgressNote(channel.perform, CHAT, after=15, edit_every=3, sleep=timer, clock=lambda: now[0])
    note.start()
    timer.elapsed.set()
    await channel.performed.wait()
    for step in range(5):
        await note.step(f"tool_{step}()")
    now[0] += 3
    await note.step("tool_5()")
    await note.close()
    edits = [a for a in channel.actions if isinstance(a, EditText)]
    assert [e.text for e in edits] == ["Still working on it… step 6: tool_5()"]


async def test_once_an_edit_waits_in_the_outbox_the_note_is_not_edited_again_and_still_taken_down() -> None:
    channel, timer = Channel(), Timer()

    async def perform(action: Action) -> ActionResult:
        result = await channel.perform(action)
        # Telegram asked us to slow down: the outbox keeps the edit and tries it later.
        return ActionResult(ok=True, queued=True) if isinstance(action, EditText) else result

    note = ProgressNote(perform, CHAT, after=15, edit_every=0, sleep=timer)
    note.start()
    timer.elapsed.set()
    await channel.performed.wait()
    for step in range(3):
        await note.step(f"tool_{step}()")
    await note.close()
    assert [type(a) for a in channel.actions] == [SendText, EditText, DeleteMessage]


async def test_off_at_zero() -> None:
    channel = Channel()
    note = ProgressNote(channel.perform, CHAT, after=0)
    note.start()
    await note.step("anything()")
    await note.close()
    assert channel.actions == []


async def test_the_last_step_of_a_burst_is_shown_when_the_interval_is_up() -> None:
    channel = Channel()
    waits: list[float] = []
    edited = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)  # the note's first wait and the trailing edit's both pass at once here

    async def perform(action: Action) -> ActionResult:
        if isinstance(action, EditText):
            edited.set()
        return await channel.perform(action)

    note = ProgressNote(perform, CHAT, after=15, edit_every=3, sleep=sleep, clock=lambda: 100.0)
    note.start()
    await channel.performed.wait()
    await note.step("current_time()")
    await edited.wait()
    await note.close()
    assert waits == [15, 3.0]
    assert [a.text for a in channel.actions if isinstance(a, EditText)] == ["Still working on it… step 1: current_time()"]
