"""The owner's approval of a tool call, asked before it runs; and the presses that answer it.

A call is asked about when the owner's `plugins.json` lists its tool under `ask_before` (names, `*` a wildcard), or
when its run has read untrusted content (`ToolContext.untrusted`) and the call acts outside the workspace
(`Tool.reaches_out`). One approval covers both. The registry asks `Approvals.check` before every call.

The approval is stored (`store/approvals.py`) before the owner is asked, in their private chat on the channel of the
asking chat, with two buttons carrying only `a:<token>:1` (approve) and `a:<token>:0` (deny). Nothing runs until the
owner approves; a deny, or no answer within the timeout, gives the model `DENIED` as the tool's result. A press is
checked here, between the questions and the console:

- the owner's press on the asking message, in time, while the approval is open: the waiting call goes on or gets
  `DENIED`; after a restart (nothing waits) the decision is kept for the run that asks for the same call again;
- anyone else's press, forged or unknown data, another chat or message, a second press, a press after the timeout:
  refused in the press's answer, and nothing runs.

Where there are no buttons (the terminal, the dashboard, Matrix: `Capabilities.buttons`) the owner types 1/approve or
2/deny in the asked chat; on Matrix the request to `matrix:<owner>` lands in the owner's DM room, which counts as that
chat (`channels.base.own_chats`).

Where several workers share one database and another process receives the owner's press, that process records the
decision (nothing waits there) and closes the asking message; the waiting call looks at the store every
`poll_seconds` beside its future and takes the decision it finds there.

A waiting call that dies with the process leaves its approval open: the turn that runs again after a restart and
asks for the same call waits on it (its buttons still on screen) instead of asking twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from bicameral.channels.base import Channel, own_chats
from bicameral.events import (
    TRUSTED_CHANNELS,
    AnswerPress,
    EditText,
    Inbound,
    OwnerId,
    Role,
    SendText,
    chat_key,
    is_owner,
    owner_on,
    sender_role,
    split_chat_key,
)
from bicameral.store.approvals import Approval, ApprovalStore
from bicameral.store.messages import MessageStore
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.types import Clock, Perform, sieved

log = logging.getLogger(__name__)

DENIED = "denied by the owner"
PRESS_PREFIX = "a:"  # every approval's button data: a:<token>:1 (approve) or a:<token>:0 (deny)
UNKNOWN = "This button is not one of my open approvals."
NOT_OWNER = "Only the owner can approve or deny this."
DECIDED = "This was already decided."
CLOSED = "This approval is closed: there was no answer in time, so it was denied."
APPROVE, DENY = "Approve", "Deny"
_DATA = re.compile(r"a:([A-Za-z0-9_-]{8,32}):([01])")
_PATTERN = re.compile(r"[A-Za-z0-9_.*-]{1,200}")
_MAX_ARGS_CHARS = 300
# Where there are no buttons (the terminal, the dashboard, Matrix: the labels are numbered) the owner types the answer.
_TYPED = {"1": True, APPROVE.casefold(): True, "2": False, DENY.casefold(): False}


class AskBefore:
    """The owner's `ask_before` list: tool names, `*` matching any run of characters."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns = tuple(patterns)
        for pattern in self.patterns:
            if not _PATTERN.fullmatch(pattern):
                raise ValueError(f"{pattern!r} is not a tool name (letters, digits, _ . - and * as a wildcard)")
        self._compiled = [re.compile(".*".join(map(re.escape, p.split("*")))) for p in self.patterns]

    def covers(self, name: str) -> bool:
        return any(pattern.fullmatch(name) for pattern in self._compiled)


def why_ask(tool: Tool[Any], args: BaseModel, ctx: ToolContext, ask_before: AskBefore) -> str | None:
    """Why this call needs the owner's approval, or None when it may run."""
    if ask_before.covers(tool.name):
        return f"{tool.name} is on your ask_before list"
    untrusted = ctx.untrusted
    if untrusted is not None and tool.reaches_out(args, ctx):
        return f"this run has read {untrusted}, and {tool.name} acts outside its workspace"
    return None


class Approvals:
    """Pending approvals: `check` asks the owner and waits; `take` (between the questions and the console) decides."""

    def __init__(
        self,
        store: ApprovalStore,
        messages: MessageStore,
        perform: Perform,
        *,
        owner_id: OwnerId,
        ask_before: AskBefore,
        timeout: float,
        redact: Callable[[str], str],
        clock: Clock = time.time,
        channels: Sequence[Channel] = (),
        poll_seconds: float = 1.0,
    ) -> None:
        if poll_seconds <= 0:
            raise ValueError(f"poll_seconds must be positive, not {poll_seconds}")
        self._store = store
        self._poll = poll_seconds  # how often a waiting call looks for a decision another process recorded
        # Channels without buttons, where the owner types 1/approve or 2/deny; their own chats as the channels know them.
        self._typed_on = TRUSTED_CHANNELS | {c.name for c in channels if not c.capabilities.buttons}
        self._own = own_chats(owner_id, channels)
        self._messages = messages
        self._perform = perform  # through the outbox: the asking message, the press's answer, the closing edit
        self._owner_id = owner_id
        self.ask_before = ask_before
        self._timeout = timeout
        self._redact = redact
        self._clock = clock
        self._waiting: dict[str, asyncio.Future[bool]] = {}
        self._started = clock()  # approvals asked before this are an earlier process's

    async def check(self, tool: Tool[Any], args: BaseModel, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        reason = why_ask(tool, args, ctx, self.ask_before)
        if reason is None:
            return None
        owner_chat = self._owner_chat(ctx.chat)
        if owner_chat is None:
            return ToolResult.error(f"{DENIED}: {tool.name} needs the owner's approval, and no owner is configured")
        call = _digest(tool.name, raw_args)
        now = self._clock()
        earlier = self._earlier(ctx.chat, call, now)
        if earlier is not None and earlier.state != "open":
            # Decided after a restart, before the run that asked (run again) got here: the decision is its.
            self._store.taken(earlier.token)
            return _outcome(earlier.state == "approved")
        token = earlier.token if earlier is not None else secrets.token_urlsafe(9)
        deadline = earlier.deadline if earlier is not None else now + self._timeout
        decided: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[token] = decided
        try:
            if earlier is None:
                text = self._text(tool.name, raw_args, ctx, owner_chat, reason)
                self._store.ask(token, ctx.chat, owner_chat, tool.name, call, text, now=now, deadline=deadline)
                log.info("asking the owner to approve %s for %s", tool.name, ctx.chat)
                if not await self._send(token, owner_chat, text):
                    return ToolResult.error(f"{DENIED}: the request for approval could not be sent")
            # else: the same call, asked before a restart, is still on screen: its buttons decide this call.
            approved = await self._decision(token, decided, deadline)
            if approved is None:
                if self._store.close(token, "expired", self._clock()):
                    await self._closed(token, "(no answer in time: denied)")
                    return _outcome(False)
                approval = self._store.get(token)  # decided in the very moment the time ran out
                self._store.taken(token)  # (in another process, perhaps: a rerun must not take it again)
                return _outcome(approval is not None and approval.state == "approved")
            return _outcome(approved)
        finally:
            # A cancelled call (a /stop, a shutdown) leaves the approval open for the run that asks again.
            self._waiting.pop(token, None)

    async def _decision(self, token: str, decided: asyncio.Future[bool], deadline: float) -> bool | None:
        """The owner's decision: from this process's `take` at once, or recorded by another process's (which also
        closed the asking message; seen within `poll_seconds`), taken by this call; None when the deadline comes first."""
        while (left := deadline - self._clock()) > 0:
            done, _ = await asyncio.wait({decided}, timeout=min(self._poll, left))
            if done:
                return decided.result()
            approval = self._store.get(token)
            if approval is not None and approval.state in ("approved", "denied"):
                self._store.taken(token)  # a run asking for the same call again must not take it too
                return approval.state == "approved"
        return None

    def _earlier(self, chat: str, call: str, now: float) -> Approval | None:
        for earlier in self._store.asked_before(chat, call, self._started, now):
            if earlier.token not in self._waiting:
                return earlier
        return None

    def _owner_chat(self, chat: str) -> str | None:
        """Where the owner is asked: their private chat on the asking chat's channel (the terminal is theirs)."""
        channel, _ = split_chat_key(chat)
        if channel in TRUSTED_CHANNELS or self._own(chat):
            return chat
        owner = owner_on(self._owner_id, channel)
        return None if owner is None else chat_key(channel, owner)

    def _text(self, name: str, raw_args: dict[str, Any], ctx: ToolContext, owner_chat: str, reason: str) -> str:
        shown = self._redact(json.dumps(raw_args, ensure_ascii=False, sort_keys=True))
        if len(shown) > _MAX_ARGS_CHARS:
            shown = shown[:_MAX_ARGS_CHARS] + "…"
        people = ctx.authority.people
        who = "you" if ctx.is_owner else ", ".join(people) or "a scheduled run"
        where = "this chat" if ctx.chat == owner_chat else ctx.chat
        minutes = max(1, round(self._timeout / 60))
        return (
            f"Approve this tool call?\n{name} {shown}\nAsked by: {who}, in {where}\nWhy: {reason}\n"
            f"(No answer within {minutes} min denies it.)"
        )

    async def _send(self, token: str, owner_chat: str, text: str) -> bool:
        buttons = ((APPROVE, f"{PRESS_PREFIX}{token}:1"), (DENY, f"{PRESS_PREFIX}{token}:0"))
        sent = await self._perform(SendText(chat=owner_chat, text=text, buttons=buttons))
        if not sent.ok:
            self._store.close(token, "expired", self._clock())
            log.warning("could not ask the owner for an approval: %s", sent.error)
            return False
        if sent.message_ids:
            self._store.sent(token, sent.message_ids[-1])
        return True

    async def take(self, inbound: Inbound) -> Inbound | None:
        """What goes on: anything but an approval's press unchanged; an approval's press is consumed here (and at the
        channels without buttons, the owner's typed 1/approve or 2/deny in the approval's chat while a call waits)."""
        if inbound.kind == "message" and inbound.channel in self._typed_on:
            return await self._typed(inbound)
        if inbound.kind != "press" or inbound.press is None or not inbound.press.data.startswith(PRESS_PREFIX):
            return inbound
        self._messages.mark_consumed([inbound.row_id])
        refusal, approval, approve = self._check_press(inbound)
        if refusal is not None or approval is None:
            log.info("approval press in %s refused: %s", inbound.chat, refusal)
            await self._answer_press(inbound, refusal or UNKNOWN)
            return None
        waiter = self._waiting.get(approval.token)
        late = waiter is None or waiter.done()
        if not self._store.close(approval.token, "approved" if approve else "denied", self._clock(), late=late):
            await self._answer_press(inbound, DECIDED)
            return None
        if waiter is not None and not waiter.done():
            waiter.set_result(approve)
        await self._answer_press(inbound, "✓ Approved" if approve else "✗ Denied")
        await self._closed(approval.token, "→ approved" if approve else "→ denied")
        return None

    async def _typed(self, inbound: Inbound) -> Inbound | None:
        words = inbound.text.strip().casefold()
        if words not in _TYPED or not is_owner(inbound, self._owner_id):
            return inbound
        for token, waiter in reversed(self._waiting.items()):
            approval = self._store.get(token)
            if approval is None or waiter.done() or not self._asked_in(approval.owner_chat, inbound.chat):
                continue
            approve = _TYPED[words]
            if self._store.close(token, "approved" if approve else "denied", self._clock()):
                self._messages.mark_consumed([inbound.row_id])
                waiter.set_result(approve)
                return None
        return inbound

    def _asked_in(self, owner_chat: str, chat: str) -> bool:
        """Whether `chat` is where the approval was asked: the same chat, or the owner's DM room that their user id
        stood for when it was sent (Matrix: `matrix:@owner:server` is sent to the room that is the DM)."""
        channel, _ = split_chat_key(chat)
        owner = owner_on(self._owner_id, channel)
        return owner_chat == chat or (owner is not None and owner_chat == chat_key(channel, owner) and self._own(chat))

    def sieve(self, then: Callable[[Inbound], Awaitable[None]]) -> Callable[[Inbound], Awaitable[None]]:
        """`then`, with approvals' presses taken out first."""
        return sieved(self.take, then)

    def _check_press(self, inbound: Inbound) -> tuple[str | None, Approval | None, bool]:
        """(why the press does nothing, or None; the approval; approve or deny)."""
        match = _DATA.fullmatch(inbound.press.data) if inbound.press is not None else None
        if match is None:
            return UNKNOWN, None, False
        approval = self._store.get(match[1])
        if (
            approval is None
            or approval.owner_chat != inbound.chat
            or (approval.message_id is not None and approval.message_id != inbound.message_id)
        ):
            return UNKNOWN, None, False
        if sender_role(inbound.channel, inbound.sender.id, self._owner_id) is not Role.OWNER:
            return NOT_OWNER, None, False
        if approval.state == "expired":
            return CLOSED, None, False
        if approval.state != "open":
            return DECIDED, None, False
        if not approval.is_open(self._clock()):
            self._store.close(approval.token, "expired", self._clock())
            return CLOSED, None, False
        return None, approval, match[2] == "1"

    async def _answer_press(self, inbound: Inbound, text: str) -> None:
        if inbound.press is not None:
            await self._perform(AnswerPress(chat=inbound.chat, press_id=inbound.press.id, text=text))

    async def _closed(self, token: str, outcome: str) -> None:
        """The asking message without its buttons, saying how it ended (its buttons answer DECIDED anyway)."""
        approval = self._store.get(token)
        if approval is None or approval.message_id is None:
            return
        edit = EditText(chat=approval.owner_chat, message_id=approval.message_id, text=f"{approval.summary}\n\n{outcome}")
        result = await self._perform(edit)
        if not result.ok:
            log.info("could not close the approval's message: %s", result.error)


def _digest(name: str, raw_args: dict[str, Any]) -> str:
    """The same call (tool and arguments) gives the same digest in any process."""
    text = json.dumps([name, raw_args], ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _outcome(approved: bool) -> ToolResult | None:
    return None if approved else ToolResult.error(DENIED)
