"""Approvals across a restart, without the app: a decision pressed while nothing waits (the process restarted, and
the turn has not asked again yet) goes to the run that asks for the same call, once; a call with other arguments is
asked anew."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bicameral.events import Action, ActionResult, Authority, Inbound, Press, Role, Sender, SendText
from bicameral.store import Stores
from bicameral.store.approvals import ApprovalStore
from bicameral.tools.approvals import DENIED, Approvals, AskBefore
from bicameral.tools.base import Tool, ToolContext, ToolResult

OWNER = 1001
CHAT = f"telegram:{OWNER}"


class NoteArgs(BaseModel):
    text: str


class Note(Tool[NoteArgs]):
    name = "note"
    args_model = NoteArgs

    async def run(self, args: NoteArgs, ctx: ToolContext) -> ToolResult:  # pragma: no cover - never run here
        return ToolResult("noted")


class Channel:
    """Every action succeeds; each text gets the next message id."""

    def __init__(self) -> None:
        self.sent: list[Action] = []
        self._more = asyncio.Event()

    async def perform(self, action: Action) -> ActionResult:
        self.sent.append(action)
        self._more.set()
        return ActionResult(ok=True, message_ids=(str(len(self.sent)),))

    async def until_asked(self, n: int) -> None:
        while len(self.asks()) < n:
            self._more.clear()
            await asyncio.wait_for(self._more.wait(), timeout=5)

    def asks(self) -> list[SendText]:
        return [a for a in self.sent if isinstance(a, SendText)]


def _approvals(stores: Stores, channel: Channel, clock: list[float]) -> Approvals:
    return Approvals(
        ApprovalStore(stores.db), stores.messages, channel.perform, owner_id=OWNER, ask_before=AskBefore(["note"]),
        timeout=600, redact=stores.redact, clock=lambda: clock[0],
    )


def _ctx() -> ToolContext:
    async def perform(action: Action) -> ActionResult:  # pragma: no cover - approvals send through their own port
        raise AssertionError(action)

    return ToolContext(chat=CHAT, turn_id="t", data_dir=Path("/nonexistent"), perform=perform,
                       authority=Authority.of(Role.OWNER, [CHAT]))


def _press(message_id: str, data: str) -> Inbound:
    return Inbound(
        channel="telegram", chat=CHAT, message_id=message_id, sender=Sender(id=str(OWNER), name="Owner"), text="",
        ts=0.0, kind="press", press=Press(id="q1", data=data),
    )


async def _check(approvals: Approvals, args: dict[str, Any]) -> ToolResult | None:
    return await approvals.check(Note(), NoteArgs(**args), args, _ctx())


async def test_a_decision_made_while_nothing_waits_goes_to_the_run_asking_again(tmp_path, database_location):
    stores = Stores.open(database_location, data_dir=tmp_path)
    clock = [1000.0]
    channel = Channel()
    first = _approvals(stores, channel, clock)
    waiting = asyncio.create_task(_check(first, {"text": "x"}))
    await channel.until_asked(1)
    waiting.cancel()  # the process ends; the approval stays open
    clock[0] += 5
    again = _approvals(stores, channel, clock)  # the next process
    [ask] = channel.asks()
    approve = dict(ask.buttons)["Approve"]
    assert await again.take(_press("1", approve)) is None
    assert await _check(again, {"text": "x"}) is None, "the decision pressed after the restart is this call's"
    assert len(channel.asks()) == 1, "not asked twice"
    # Other arguments are another call: asked anew.
    other = asyncio.create_task(_check(again, {"text": "y"}))
    await channel.until_asked(2)
    other.cancel()
    stores.close()


async def test_a_late_deny_is_handed_out_once(tmp_path, database_location):
    stores = Stores.open(database_location, data_dir=tmp_path)
    clock = [1000.0]
    channel = Channel()
    first = _approvals(stores, channel, clock)
    waiting = asyncio.create_task(_check(first, {"text": "x"}))
    await channel.until_asked(1)
    waiting.cancel()
    clock[0] += 5
    again = _approvals(stores, channel, clock)
    deny = dict(channel.asks()[0].buttons)["Deny"]
    assert await again.take(_press("1", deny)) is None
    denied = await _check(again, {"text": "x"})
    assert denied is not None and denied.content == DENIED
    # Handed out once: the same call asked again later is a new request.
    asking = asyncio.create_task(_check(again, {"text": "x"}))
    await channel.until_asked(2)
    asking.cancel()
    stores.close()
