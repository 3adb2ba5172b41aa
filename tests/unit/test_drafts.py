"""The draft of a reply as the model writes it: deltas coalesced into whole-text updates sent by a task of their own,
whole words only, taken away when the call is not the reply, stopped for good by a channel without drafts."""

from __future__ import annotations

import asyncio

from bicameral.delivery.drafts import Drafting, DraftStream
from bicameral.events import Action, ActionResult, Draft
from bicameral.models.base import ModelError, TextDelta, ToolCall, complete


class Channel:
    """Records the drafts it is handed; `hold` keeps a perform waiting, as a slow channel would."""

    def __init__(self, *, shows_drafts: bool = True) -> None:
        self.drafts: list[str] = []
        self.shows_drafts = shows_drafts
        self.hold: asyncio.Event | None = None
        self.arrived = asyncio.Event()

    async def perform(self, action: Action) -> ActionResult:
        assert isinstance(action, Draft) and action.key == "turn-1"
        self.drafts.append(action.text)
        self.arrived.set()
        if self.hold is not None:
            await self.hold.wait()
        return ActionResult(ok=True) if self.shows_drafts else ActionResult.failed("no drafts")

    async def next(self) -> str:
        await self.arrived.wait()
        self.arrived.clear()
        return self.drafts[-1]


async def test_deltas_arriving_while_an_update_is_out_are_coalesced_into_the_next_one():
    channel = Channel()
    channel.hold = asyncio.Event()
    draft = DraftStream(channel.perform, "web:owner", "turn-1", interval=0)
    draft.begin()
    draft.show("Hello ")
    assert await channel.next() == "Hello"  # the first update goes at once
    for piece in ("there, ", "how ", "are ", "you"):
        draft.show(piece)  # the model is never held up by the slow channel
    channel.hold.set()
    assert await channel.next() == "Hello there, how are"  # one update for all of them, whole words only
    await draft.settle()
    draft.show(" today? ")  # after settle nothing more is sent: the reply takes the draft's place
    await draft.close()
    assert channel.drafts == ["Hello", "Hello there, how are", ""]  # close takes a draft no reply took away


async def test_a_channel_without_drafts_is_asked_once_per_turn():
    channel = Channel(shows_drafts=False)
    draft = DraftStream(channel.perform, "telegram:1", "turn-1", interval=0)
    draft.begin()
    draft.show("one ")
    await channel.next()
    for piece in ("two ", "three ", "four "):
        draft.show(piece)
        await asyncio.sleep(0)
    await draft.close()
    assert channel.drafts == ["one"]  # refused once; close has nothing to take away


async def test_a_call_that_turns_to_a_tool_or_fails_takes_its_text_away():
    class Model:
        name = "fake"

        def __init__(self, *events: object) -> None:
            self.events = events

        async def aclose(self) -> None: ...

        async def stream(self, system, messages, tools, max_tokens):  # type: ignore[no-untyped-def]
            for event in self.events:
                if isinstance(event, Exception):
                    raise event
                yield event
                await asyncio.sleep(0)

    channel = Channel()
    draft = DraftStream(channel.perform, "web:owner", "turn-1", interval=0)
    tool = ToolCall("t1", "current_time", {})
    await complete(Drafting(Model(TextDelta("Let me "), TextDelta("look. "), tool), draft, final_only=True), "", [], [], 10)
    while channel.drafts[-1:] != [""]:
        await channel.next()  # the tool call takes the text away
    assert channel.drafts[0] in ("Let me", "Let me look.")
    # The front's text stays beside its actions: it is the reply.
    await complete(Drafting(Model(TextDelta("On it. "), tool), draft, final_only=False), "", [], [], 10)
    assert await channel.next() == "On it."
    failing = Drafting(Model(TextDelta("Half "), TextDelta("done "), ModelError("server", "gone")), draft, final_only=True)
    try:
        await complete(failing, "", [], [], 10)
    except ModelError:
        pass
    await draft.close()
    assert channel.drafts[-1] == ""  # whatever of it was shown is gone
