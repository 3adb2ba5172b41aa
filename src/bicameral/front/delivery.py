"""How words reach the user: natural chunks, jittered typing pauses, the tone shim and framing."""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable, Sequence

from bicameral.delivery.outbox import Outbox
from bicameral.events import SendFile, SendText, Typing
from bicameral.models.base import Message, Model, ModelError, complete

log = logging.getLogger(__name__)

SHIM_PROMPT = (
    "Rephrase the text in the voice of {bot_name}: a warm, brief personal assistant in a chat app. "
    "No content changes: keep every fact, number, name, link and code block exactly. Do not add "
    "greetings or questions. Reply with the rephrased text only."
)
FRAME_PROMPT = (
    "You are {bot_name}, a warm, brief personal assistant in a chat app. Your executor finished a task "
    "for the user. Rewrite its result as your own message to the user: open with one natural framing "
    "line, then the substance. Keep every fact, number, name, link and code block; drop executor "
    "chatter. Punchline last. Separate natural message breaks with blank lines. Reply with the message only."
)
_SINGLE_MESSAGE_CHARS = 700
_KEEP = re.compile(r"https?://\S+|`[^`]+`|\d[\d.,:%]*")


class Delivery:
    def __init__(
        self,
        outbox: Outbox,
        front_model: Model,
        *,
        bot_name: str = "bicameral",
        pause_scale: float = 1.0,
        max_tokens: int = 1500,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._outbox = outbox
        self._model = front_model
        self._bot_name = bot_name
        self._pause_scale = pause_scale
        self._max_tokens = max_tokens
        self._rng = rng or random.Random()
        self._sleep = sleep

    async def say(
        self,
        chat: str,
        text: str,
        *,
        reply_to: str | None = None,
        thread_id: str | None = None,
        turn: str | None = None,
        on_recorded: Callable[[], None] | None = None,
        files: Sequence[SendFile] = (),
        audience: tuple[str, ...] = (),
        draft: str | None = None,
        answers: Sequence[int] = (),
    ) -> list[str]:
        """Send text as 1-3 natural messages, each after a jittered typing pause, then `files`; returns the ids sent so far.

        Every part is in the outbox before the first goes out (`on_recorded` runs then); the later
        parts follow on the outbox's timers, so a restart between parts delivers the rest.
        """
        parts = natural_parts(text)
        if not parts:
            return []
        pause = self.pause_before(parts[0], first=True)
        if pause > 0:  # the typing belongs to the pause; with pacing off there is nothing to show
            await self._outbox.perform(Typing(chat=chat, thread_id=thread_id))
            await self._sleep(pause)
        messages = [
            SendText(chat=chat, text=part, reply_to=reply_to if index == 0 else None, thread_id=thread_id, audience=audience,
                     draft=draft if index == 0 else None)  # the first part takes the draft's place
            for index, part in enumerate(parts)
        ]
        pauses = [0.0] + [self.pause_before(part, first=False) for part in parts[1:]]
        pauses += [self.pause_before("", first=True) for _ in files]
        results = await self._outbox.send(
            [*messages, *files], turn=turn, pauses=pauses, on_recorded=on_recorded, answers=answers
        )
        return [message_id for result in results for message_id in result.message_ids]

    def pause_before(self, part: str, *, first: bool) -> float:
        """A typing pause that grows with the text, never the same twice."""
        base = 0.6 if first else min(max(len(part) / 60, 2.0), 8.0)
        return base * self._rng.uniform(0.6, 1.4) * self._pause_scale

    async def shim(self, text: str) -> str:
        """Rephrase a short result in the assistant's voice; the original wins if facts would change."""
        system = SHIM_PROMPT.format(bot_name=self._bot_name)
        return await self._rewrite(system, text, text)

    async def frame(self, spec: str, result: str) -> str:
        """Rewrite a long result as the assistant's own framed message."""
        system = FRAME_PROMPT.format(bot_name=self._bot_name)
        prompt = f"<task>{spec}</task>\n<result>\n{result}\n</result>"
        return await self._rewrite(system, prompt, result)

    async def _rewrite(self, system: str, prompt: str, original: str) -> str:
        try:
            completion = await complete(self._model, system, [Message.user(prompt)], [], self._max_tokens)
        except ModelError as exc:
            log.info("voice pass skipped (%s); delivering the result as written", exc.kind)
            return original
        rewritten = completion.text.strip()
        if not rewritten or not keeps_content(original, rewritten):
            return original
        return rewritten


def natural_parts(text: str) -> list[str]:
    """Split a long reply into 2-3 messages at paragraph boundaries; short replies stay whole."""
    text = text.strip()
    if len(text) <= _SINGLE_MESSAGE_CHARS:
        return [text] if text else []
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paragraphs) == 1:
        return [text]
    count = 2 if len(text) < 1800 else 3
    target = len(text) / count
    parts: list[str] = []
    current: list[str] = []
    for paragraph in paragraphs:
        current.append(paragraph)
        if len("\n\n".join(current)) >= target and len(parts) < count - 1:
            parts.append("\n\n".join(current))
            current = []
    if current:
        parts.append("\n\n".join(current))
    return parts


def keeps_content(original: str, rewritten: str) -> bool:
    """True when every number, link and inline code of the original survives the rewrite."""
    return all(token in rewritten for token in _KEEP.findall(original))
