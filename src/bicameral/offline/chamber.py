"""The offline chamber: with the bundled local model, which cannot call a tool, a few plain requests are
recognised by rules (`intents.py`) and carried out by the real tools; everything else goes to the model.

"remember that …" runs `remember`, "remind me … at/in/tomorrow …" `schedule_create`, a page with "what does it
say" or "summarise" `web_fetch`, "what did I tell you about …" `recall`; each through the registry, as a model's
call would go (validation, rights, audit), and the answer is made of the tool's result ("Noted: …", "I'll remind
you on Thu 26 Nov at 09:00 (UTC): …", "From my notes: …"). The exchange joins the chat's session, so the model
sees it on its next turn.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from bicameral.events import Authority, Inbound, SendText
from bicameral.failures import tool_failed
from bicameral.offline.intents import Fetch, Intent, Recall, Remember, Remind, triage
from bicameral.offline.when import Due, resolve
from bicameral.sandbox.artifacts import SendLimits
from bicameral.store import Stores
from bicameral.store.memory_index import meaningful_words
from bicameral.store.schedule_times import zone
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry
from bicameral.tools.reminders import user_timezone
from bicameral.turns.turn import Turn, TurnHandler
from bicameral.types import Clock

# A page is shown from its beginning, this long at most, cut at a paragraph or sentence.
EXCERPT_CHARS = 900
# Notes shown for one question.
SHOWN_NOTES = 3
# How `recall` lists a fact (tools/memory.py `describe`): `[id] (where, importance 0.5) text`.
_FACT_LINE = re.compile(r"^\[[^\]]+\] \([^)]*importance [^)]*\) (?P<text>.*)$")
# How `web_fetch` wraps a page (tools/web.py `untrusted`).
_PAGE = re.compile(r'^<untrusted_content source="(?P<source>[^"]*)">\n[^\n]*\n\n(?P<text>.*)\n</untrusted_content>$', re.DOTALL)
_YOURS = [
    (re.compile(r"\bI am\b", re.IGNORECASE), "you are"),
    (re.compile(r"\bI was\b", re.IGNORECASE), "you were"),
    (re.compile(r"\bI'm\b", re.IGNORECASE), "you're"),
    (re.compile(r"\bI've\b", re.IGNORECASE), "you've"),
    (re.compile(r"\bI'll\b", re.IGNORECASE), "you'll"),
    (re.compile(r"\bI'd\b", re.IGNORECASE), "you'd"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "yourself"),
    (re.compile(r"\bmine\b", re.IGNORECASE), "yours"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "your"),
    (re.compile(r"\bme\b", re.IGNORECASE), "you"),
    (re.compile(r"\bI\b"), "you"),
]


@dataclass(frozen=True)
class OfflineConfig:
    """What the offline chamber is given: the bot's name (a group addresses it by name), where files live and
    how many a turn may send (the turn's tool context)."""

    bot_name: str
    data_dir: Path
    sending: SendLimits


class Answering(TurnHandler, Protocol):
    """The chamber behind the rules (single mode on the local model), which keeps what they answered."""

    def record(self, turn: Turn, reply: str) -> None:
        """Add the turn's messages and this reply to the chat's session."""


class OfflineChamber:
    """A TurnHandler: the rules for what they recognise, `inner` (the local model) for the rest."""

    def __init__(
        self, inner: Answering, registry: ToolRegistry, stores: Stores, config: OfflineConfig, *, clock: Clock = time.time
    ) -> None:
        self._inner = inner
        self._registry = registry
        self._stores = stores
        self._config = config
        self._clock = clock

    async def start(self) -> None:
        await self._inner.start()

    async def stop(self) -> None:
        await self._inner.stop()

    def reset(self, chat: str) -> None:
        self._inner.reset(chat)

    async def interrupt(self, chat: str, by: Authority | None = None) -> bool:
        return await self._inner.interrupt(chat, by)

    async def handle(self, turn: Turn) -> None:
        found = [(message, self._intent(message)) for message in turn.batch]
        if all(intent is None for _, intent in found):
            await self._inner.handle(turn)
            return
        ctx = turn.tool_context(self._stores, self._config.data_dir, self._config.sending)
        ctx.now = self._now
        answered: list[Inbound] = []
        answers: list[str] = []
        rest: list[Inbound] = []
        for message, intent in found:
            answer = await self._answer(intent, message, ctx) if intent is not None else None
            if answer is None:
                rest.append(message)
            else:
                answered.append(message)
                answers.append(answer)
        if answers:
            reply = "\n\n".join(answers)
            await turn.perform(SendText(chat=turn.chat, text=reply, reply_to=turn.reply_anchor, thread_id=turn.thread_id))
            self._inner.record(replace(turn, batch=answered), reply)
        if rest:
            await self._inner.handle(replace(turn, batch=rest))

    # --- private ---

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def _intent(self, message: Inbound) -> Intent | None:
        """Only a person's own words, typed or spoken: no fired schedule, no other files, nothing overheard."""
        files = any(a.kind != "voice" for a in message.attachments)  # a voice note's transcript is its text
        if message.kind != "message" or files or message.attachment_refs or not message.addressed:
            return None
        return triage(message.text, self._config.bot_name)

    async def _answer(self, intent: Intent, message: Inbound, ctx: ToolContext) -> str | None:
        """The reply to one recognised request, or None to leave the message to the model after all."""
        if isinstance(intent, Remember):
            return await self._remember(intent, message, ctx)
        if isinstance(intent, Remind):
            return await self._remind(intent, ctx)
        if isinstance(intent, Fetch):
            return await self._fetch(intent, ctx)
        return await self._recall(intent, ctx)

    async def _remember(self, intent: Remember, message: Inbound, ctx: ToolContext) -> str:
        personal = _personal(ctx)
        # In a group the fact is the group's: whose "my" it was must stay with it.
        text = intent.fact if personal else f"{message.sender.name}: {intent.fact}"
        result = await self._registry.execute("remember", {"text": text}, ctx)
        if result.is_error:
            return tool_failed("note that", result.content)
        shown = _yours(text) if personal else text
        if result.content.startswith("already remembered"):
            return f"I had that already: {shown}"
        return f"Noted: {shown}"

    async def _remind(self, intent: Remind, ctx: ToolContext) -> str:
        example = f'"remind me tomorrow at 9 to {intent.what}"'
        if intent.repeating:
            return f"Offline I set one-off reminders only: say one time, e.g. {example}."
        if intent.when is None:
            return f"When should I remind you? Say the time with it, e.g. {example}."
        store = self._stores.schedules
        tz = user_timezone(store, ctx.reach.person if ctx.reach is not None and ctx.reach.person else ctx.chat)
        now = self._clock()
        due = await asyncio.to_thread(resolve, intent.when, now, tz)  # the first one loads dateparser
        if due is None:
            return f'When is "{intent.when}"? Say it like "tomorrow at 9", "in 20 minutes" or "on 3 December at 18:00".'
        when: dict[str, str | float] = (
            {"in_minutes": due.minutes_from_now} if due.minutes_from_now is not None else {"at": due.at}
        )
        result = await self._registry.execute("schedule_create", {"text": intent.what, "timezone": tz, **when}, ctx)
        if result.is_error:
            return tool_failed("set that reminder", result.content)
        what = _yours(intent.what) if _personal(ctx) else intent.what
        return f"I'll remind you {_spoken(due, now, tz)} ({tz}): {what}"

    async def _fetch(self, intent: Fetch, ctx: ToolContext) -> str:
        url = intent.url if re.match(r"https?://", intent.url, re.IGNORECASE) else f"https://{intent.url}"
        result = await self._registry.execute("web_fetch", {"url": url}, ctx)
        if result.is_error:
            return tool_failed(f"read {intent.url}", result.content)
        page = _PAGE.match(result.content)
        source, text = (html.unescape(page.group("source")), page.group("text")) if page else (url, result.content)
        text = text.replace("&lt;/untrusted_content", "</untrusted_content").strip()
        if not text:
            return f"{source} has no readable text."
        excerpt = _excerpt(text, EXCERPT_CHARS)
        more = len(text) - len(excerpt)
        tail = f"\n\n(the page's opening; {more:,} more characters)" if more > 0 else ""
        return f"From {source}:\n\n{excerpt}{tail}"

    async def _recall(self, intent: Recall, ctx: ToolContext) -> str | None:
        result = await self._registry.execute("recall", {"query": intent.query, "limit": 8}, ctx)
        if result.is_error:
            return tool_failed("look in my notes", result.content)
        facts = [m.group("text") for line in result.content.splitlines() if (m := _FACT_LINE.match(line))]
        whole = [fact for fact in facts if _answers(fact, intent.query)] if intent.query else facts
        if not intent.sure and not whole:
            return None  # "what is my …" that no note answers: a question for the model
        shown = (whole or facts)[:SHOWN_NOTES] if intent.query else facts
        personal = _personal(ctx)
        shown = [_yours(fact) if personal else fact for fact in shown]
        if not shown:
            about = _yours(intent.query) if personal else intent.query
            return f"I have nothing noted about {about}." if intent.query else "I have nothing noted yet."
        if len(shown) == 1:
            return f"From my notes: {shown[0]}"
        return "From my notes:\n" + "\n".join(f"- {fact}" for fact in shown)


def _personal(ctx: ToolContext) -> bool:
    """Is this one person's conversation (their private notes), so "my" in a note is theirs to hear as "your"?"""
    return ctx.reach is not None and ctx.reach.person is not None


def _yours(text: str) -> str:
    """The person's words said back to them: "my sister" becomes "your sister", "I'm" "you're"."""
    for pattern, said in _YOURS:
        text = pattern.sub(said, text)
    return text


def _answers(fact: str, query: str) -> bool:
    """Does the note hold every word the question asks about ("parked" answers "park")?"""
    have = meaningful_words(fact)
    return all(any(_same_word(word, got) for got in have) for word in meaningful_words(query))


def _same_word(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    return long.startswith(short[:5]) if len(short) >= 4 else short == long


def _spoken(due: Due, now: float, tz: str) -> str:
    """ "on Thu 26 Nov at 09:00": the day always said, so a misunderstood time shows."""
    moment = due.local
    year = "" if moment.year == datetime.fromtimestamp(now, zone(tz)).year else f" {moment.year}"
    return f"on {moment:%a} {moment.day} {moment:%b}{year} at {moment:%H:%M}"


def _excerpt(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    for mark in ("\n\n", "\n", ". "):
        at = cut.rfind(mark)
        if at > limit // 2:
            return cut[: at + (1 if mark == ". " else 0)].rstrip()
    return cut.rstrip() + "…"
