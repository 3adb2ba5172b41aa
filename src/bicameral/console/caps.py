"""Spending caps at the console: messages held while their people are over a cap, the owner's one message per person
and UTC day with its buttons, and the presses on them.

Between the console and the lanes, a message whose people are over a cap (`models/caps.py`) is held: it stays
pending in the store, and its sender is told in one sentence, once (`cap_holds` remembers it across a restart). A
turn that a cap stopped part-way (its chamber said the sentence) is held the same way. The owner gets one message per
person (or everyone together) and day with three buttons, `c:<token>:m|t|k`: allow as many tokens more today, allow
without a cap until tomorrow, or keep the cap. An allowance is stored, and what was held is answered in order. Keeping
the cap leaves it held: it is answered on the next UTC day, when the cap resets (on the first message or press that
day, or at the next start). A press from anyone but the owner, forged or foreign data, a second press or a press on an
earlier day's message changes nothing; the presser is told why.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bicameral.console.desk import MEMBER_COMMANDS
from bicameral.events import AnswerPress, EditText, Inbound, OwnerId, SendText, authority_of, is_owner, person_key
from bicameral.failures import failure_sentence
from bicameral.models.caps import EVERYONE, Refusal, SpendingCaps
from bicameral.store.caps import CapNotice, CapStore
from bicameral.store.messages import MessageStore
from bicameral.types import Clock, Perform

log = logging.getLogger(__name__)

PRESS_PREFIX = "c:"
_DATA = re.compile(r"c:([A-Za-z0-9_-]{8,16}):([mtk])")
NOT_YOURS = "Only the owner can change a spending cap."
UNKNOWN = "This button is not one of my questions about a spending cap."
ANSWERED = "This was already answered."
EXPIRED = "That was about an earlier day; the cap has reset since."
_LANE_COMMANDS = frozenset(c.name for c in MEMBER_COMMANDS)  # /stop, /memory, ...: answered without a model


class CapDesk:
    """Holds what a cap stops, asks the owner, and lets it go when they allow more (or the day turns)."""

    def __init__(
        self,
        caps: SpendingCaps,
        store: CapStore,
        messages: MessageStore,
        *,
        forward: Callable[[Inbound], Awaitable[None]],
        send: Perform,
        owner_id: OwnerId,
        owner_chat: str | None,
        clock: Clock = time.time,
    ) -> None:
        self._caps = caps
        self._store = store
        self._messages = messages
        self._forward = forward  # the lanes
        self._send = send
        self._owner_id = owner_id
        self._owner_chat = owner_chat
        self._clock = clock
        self._held: list[Inbound] = []
        self._names: dict[str, str] = {}  # person key → the name they go by, for the owner's message
        self._asked: set[tuple[str, str]] = set()  # (day, person) the owner was (being) told about
        self._background: set[asyncio.Task[Any]] = set()
        caps.on_refusal = self._refused

    async def reread(self) -> None:
        """Other workers' spending and the owner's allowances, read again; what an allowance freed goes on."""
        if not self._caps.active:
            return
        caps = self._caps
        before = (caps.day, dict(caps.allowances))
        caps.reread()
        # Only the owner's allowance given on another worker lets held messages go here; a new day's release waits
        # for that day's first message or press, as with one worker.
        if (caps.day, caps.allowances) != before and caps.day == before[0]:
            await self._release()

    def holds(self, chat: str) -> bool:
        """Whether a message of the chat waits here for the owner (or the next day)."""
        return any(inbound.chat == chat for inbound in self._held)

    async def forward(self, inbound: Inbound) -> None:
        """A message on its way to the lanes: held while its people are over a cap, else handed on."""
        if not self._caps.active or inbound.kind == "press" or inbound.command in _LANE_COMMANDS:
            await self._forward(inbound)
            return
        if inbound.kind != "synthetic":
            self._names[person_key(inbound)] = inbound.sender.name
        await self._release()  # what was held for a day gone by goes first
        if self._caps.check(authority_of(inbound, self._owner_id).people) is None:
            await self._forward(inbound)
            return
        self._held.append(inbound)  # pending in the store: after a restart it comes back through here
        if inbound.row_id is not None and self._store.hold(inbound.row_id, self._clock()):
            self._later(self._tell(inbound))

    def hold_refused(self, batch: list[Inbound]) -> None:
        """A turn a cap refused (its chamber told them): its messages wait like those held on the way in."""
        for inbound in batch:
            if inbound.row_id is not None:
                self._store.hold(inbound.row_id, self._clock())
            self._held.append(inbound)

    def sieve(self, then: Callable[[Inbound], Awaitable[None]]) -> Callable[[Inbound], Awaitable[None]]:
        """`then`, with presses on the owner's cap buttons taken out first."""

        async def forward(inbound: Inbound) -> None:
            if inbound.kind == "press" and inbound.press is not None and inbound.press.data.startswith(PRESS_PREFIX):
                await self._pressed(inbound)
            else:
                await then(inbound)

        return forward

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()

    # --- the owner's message ---

    def _refused(self, refusal: Refusal) -> None:
        """A cap refused a call or a message: the owner hears of it once per person and day."""
        key = (self._caps.day, refusal.person or EVERYONE)
        if key not in self._asked:
            self._asked.add(key)
            self._later(self._ask_owner(refusal, *key))

    async def _ask_owner(self, refusal: Refusal, day: str, person: str) -> None:
        if self._owner_chat is None:
            log.warning("%s; no owner is set to ask for more", refusal)
            return
        token = secrets.token_urlsafe(9)
        if not self._store.add_notice(token, day, person, self._owner_chat, self._clock()):
            return  # asked before a restart
        more = self._base(person)
        if person == EVERYONE:
            text = (
                f"Everyone together has used {refusal.spent:,} of {refusal.cap:,} tokens today (UTC); "
                "I'm holding what comes in."
            )
        else:
            text = (
                f"{self._who(person)} has used {refusal.spent:,} of their {refusal.cap:,} tokens today (UTC); "
                "I'm holding their messages."
            )
        buttons = (
            (f"Allow {more:,} more today", f"c:{token}:m"),
            ("Allow until tomorrow", f"c:{token}:t"),
            ("Keep the cap", f"c:{token}:k"),
        )
        sent = await self._send(SendText(chat=self._owner_chat, text=text, purpose="notice", buttons=buttons))
        if sent.message_ids:
            self._store.notice_sent(token, sent.message_ids[-1])

    # --- presses ---

    async def _pressed(self, inbound: Inbound) -> None:
        self._messages.mark_consumed([inbound.row_id])
        why, notice, choice = self._check(inbound)
        if why is not None or notice is None:
            log.info("cap press in %s refused: %s", inbound.chat, why)
            await self._answer(inbound, why or UNKNOWN)
            return
        if not self._store.answer(notice.token, choice):
            await self._answer(inbound, ANSWERED)  # the other of two presses won
            return
        if choice != "k":
            self._store.allow(notice.day, notice.person, self._base(notice.person) if choice == "m" else None)
            self._caps.refresh()
        label = {"m": f"allowed {self._base(notice.person):,} more today", "t": "allowed until tomorrow"}.get(choice, "cap kept")
        await self._answer(inbound, f"✓ {label[0].upper()}{label[1:]}")
        if notice.message_id is not None:
            who = "everyone together" if notice.person == EVERYONE else self._who(notice.person)
            await self._send(EditText(chat=notice.chat, message_id=notice.message_id, text=f"Spending cap for {who}: {label}."))
        await self._release()

    def _check(self, inbound: Inbound) -> tuple[str | None, CapNotice | None, str]:
        """(why the press does nothing, or None; the notice; the choice)."""
        match = _DATA.fullmatch(inbound.press.data) if inbound.press is not None else None
        notice = self._store.notice(match[1]) if match is not None else None
        if (
            match is None
            or notice is None
            or notice.chat != inbound.chat
            or (notice.message_id is not None and notice.message_id != inbound.message_id)
        ):
            return UNKNOWN, None, ""
        if not is_owner(inbound, self._owner_id):
            return NOT_YOURS, None, ""
        if notice.state != "open":
            return ANSWERED, None, ""
        if notice.day != self._caps.today()[0]:
            self._store.answer(notice.token, "expired")
            return EXPIRED, None, ""
        return None, notice, match[2]

    async def _answer(self, inbound: Inbound, text: str) -> None:
        if inbound.press is not None:
            await self._send(AnswerPress(chat=inbound.chat, press_id=inbound.press.id, text=text))

    # --- held messages ---

    async def _release(self) -> None:
        """Hand on, in order, the held messages whose people are no longer over a cap."""
        if not self._held:
            return
        free = [i for i in self._held if self._caps.check(authority_of(i, self._owner_id).people, tell=False) is None]
        if not free:
            return
        self._held = [i for i in self._held if i not in free]
        self._store.release([i.row_id for i in free if i.row_id is not None])
        for inbound in free:
            await self._forward(inbound)

    async def _tell(self, inbound: Inbound) -> None:
        reply_to = None if inbound.is_private else inbound.message_id
        await self._send(SendText(
            chat=inbound.chat, text=failure_sentence("cap"), reply_to=reply_to, thread_id=inbound.thread_id,
            audience=(person_key(inbound),), purpose="notice",
        ))

    def _base(self, person: str) -> int:
        """The cap itself: what "allow N more" adds."""
        return (self._caps.everyone if person == EVERYONE else self._caps.per_user) or 0

    def _who(self, person: str) -> str:
        name = self._names.get(person)
        return f"{name} ({person})" if name else person

    def _later(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def caps_text(caps: SpendingCaps) -> str | None:
    """/usage's lines on the caps: each cap, today's spend against it and the owner's allowances; None without caps."""
    if not caps.active:
        return None
    day, total, spent = caps.today()
    lines = [f"Spending caps, tokens per UTC day ({day}):"]
    if caps.everyone is not None:
        lines.append(f"• Everyone together: {total:,} of {_limit(caps, EVERYONE, caps.everyone)}")
    if caps.per_user is not None:
        lines.append(f"• Each person but the owner: {caps.per_user:,}")
        for person, tokens in sorted(spent.items(), key=lambda item: (-item[1], item[0])):
            if not caps.is_owner(person):
                lines.append(f"  • {person}: {tokens:,} of {_limit(caps, person, caps.per_user)}")
    return "\n".join(lines)


def _limit(caps: SpendingCaps, person: str, cap: int) -> str:
    limit = caps.limit(person, cap)
    if limit is None:
        return f"{cap:,} (no cap until tomorrow, the owner allowed it)"
    return f"{limit:,} ({cap:,} + {limit - cap:,} the owner allowed)" if limit != cap else f"{limit:,}"
