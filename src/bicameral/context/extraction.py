"""Automatic fact extraction: after a reply, the model is asked what in the exchange is worth keeping.

It runs in the background once the reply is out, so it never delays an answer, and a failure only
costs the facts of that exchange (logged), never the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from bicameral.events import Inbound
from bicameral.models.base import Message, Model, complete
from bicameral.store.memory import MAX_FACT_CHARS, Memory
from bicameral.store.memory_scopes import OutOfReach, Reach

log = logging.getLogger(__name__)

_MAX_FACTS = 5
_KNOWN = 20
SYSTEM = """You keep a personal assistant's long-term memory. From the exchange below, pick out durable facts
worth remembering for later conversations: preferences, names, relationships, dates, places, decisions,
standing plans. Skip small talk, one-off requests and anything only true right now.

Answer with JSON only: {"facts": [{"text": "...", "importance": 0.0-1.0, "key": "short topic or null",
"about": "me" or "group"}]} ("me": the person speaking; "group": the group as a whole). At most five facts,
each one self-contained sentence naming who it is about. If a fact corrects a known one, reuse its key.
If nothing is worth keeping, answer {"facts": []}."""


class _Fact(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS)
    importance: float = Field(default=0.5, ge=0, le=1)
    key: str | None = Field(default=None, max_length=60)
    about: Literal["me", "group"] | None = None


class _Facts(BaseModel):
    facts: list[_Fact] = Field(default_factory=list, max_length=20)


class FactExtractor:
    def __init__(self, model: Model, memory: Memory, *, max_tokens: int = 600) -> None:
        self._model = model
        self._memory = memory
        self._max_tokens = max_tokens
        self._running: set[asyncio.Task[None]] = set()

    def schedule(self, reach: Reach | None, batch: Sequence[Inbound], reply: str) -> None:
        """Extract from this exchange in the background (nothing when the conversation has no memory)."""
        if reach is None or not any(i.text.strip() for i in batch):
            return
        task = asyncio.create_task(self._extract(reach, list(batch), reply), name=f"extract:{reach.chat}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def close(self) -> None:
        for task in list(self._running):
            task.cancel()
        for task in list(self._running):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _extract(self, reach: Reach, batch: list[Inbound], reply: str) -> None:
        lines = [f"{i.sender.name}: {i.text}" for i in batch if i.text.strip()]
        await self.flush(reach, "\n".join([*lines, f"assistant: {reply}"]))

    async def flush(self, reach: Reach, exchange: str) -> int:
        """Remember the durable facts of an exchange (e.g. before it is summarised away); returns how many."""
        try:
            prompt = self._prompt(reach, exchange)
            completion = await complete(self._model, SYSTEM, [Message.user(prompt)], [], self._max_tokens)
            facts = parse_facts(completion.text)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("fact extraction in %s failed: %s", reach.chat, exc)
            return 0
        kept = 0
        for fact in facts[:_MAX_FACTS]:
            try:
                scope = reach.writable(fact.about)
                self._memory.remember(scope, fact.text, importance=fact.importance, key=fact.key)
                kept += 1
            except (OutOfReach, ValueError) as exc:
                log.info("extracted fact not kept in %s: %s", reach.chat, exc)
        if kept:
            log.info("remembered %d extracted fact(s) in %s", kept, reach.chat)
        return kept

    def _prompt(self, reach: Reach, exchange: str) -> str:
        known = self._memory.important(reach.readable, _KNOWN)
        lines = ["<known_facts>"] + [f"- key={f.key or '-'}: {f.text}" for f in known] + ["</known_facts>"]
        return "\n".join([*lines, "<exchange>", exchange, "</exchange>"])


def parse_facts(text: str) -> list[_Fact]:
    """The facts in a model's answer: the first JSON object in it, validated; anything else is an error."""
    found = re.search(r"\{.*\}", text, re.DOTALL)
    if found is None:
        raise ValueError(f"no JSON object in the answer: {text[:120]!r}")
    try:
        return _Facts.model_validate(json.loads(found.group(0))).facts
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"the answer is not the facts JSON: {str(exc)[:200]}") from None
