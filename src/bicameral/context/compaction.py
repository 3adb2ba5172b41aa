"""Transcript compaction: past a token budget, older turns become a summary and recent ones stay verbatim.

Before anything is summarised away, its durable facts are flushed to memory, so nothing the user
told the assistant is lost with the detail of old turns. It serves single mode's session and a
back task's transcript alike.
"""

from __future__ import annotations

import json
import logging

from bicameral.context.extraction import FactExtractor
from bicameral.models.base import Block, Message, Model, ModelError, TextBlock, ToolResultBlock, ToolUseBlock, complete
from bicameral.store.memory_scopes import Reach

log = logging.getLogger(__name__)

SUMMARY_OPEN = "<summary of the earlier conversation>"
SYSTEM = """Summarise the earlier part of a conversation between a user and their assistant (or of the assistant's
work on a task), so the assistant can carry on without it. Keep what later turns may depend on: open requests and
promises, decisions, results found so far, names, numbers, files and links, and the user's stated preferences.
Plain prose or short bullets; no preamble."""
_TRANSCRIPT_CHARS = 60_000


def estimate_tokens(messages: list[Message]) -> int:
    """About four characters a token, over everything a request would carry."""
    return sum(len(json.dumps(m.model_dump(mode="json"), ensure_ascii=False)) for m in messages) // 4


class Compactor:
    def __init__(self, model: Model, extractor: FactExtractor, *, budget_tokens: int, keep_recent: int = 10) -> None:
        self._model = model
        self._extractor = extractor
        self._budget = budget_tokens
        self._keep = keep_recent

    async def compact(self, history: list[Message], reach: Reach | None, *, pinned: int = 0) -> list[Message]:
        """The history itself while it fits; else [*pinned, summary, *recent], facts flushed first.

        `pinned` leading messages (a task's brief) are kept verbatim ahead of the summary.
        """
        if self._budget <= 0 or estimate_tokens(history) <= self._budget:
            return history
        # Recent turns get at most half the budget, so the next few steps do not compact again at once.
        cut = safe_cut(history, max(len(history) - self._keep, _fitting(history, self._budget // 2)), floor=pinned)
        if cut is None:
            return history
        head, old, recent = history[:pinned], history[pinned:cut], history[cut:]
        transcript = render(old)
        if reach is not None:
            await self._extractor.flush(reach, transcript)
        try:
            completion = await complete(self._model, SYSTEM, [Message.user(transcript)], [], 1200)
        except ModelError as exc:
            log.warning("could not summarise the transcript (%s); keeping it as it is", exc.kind)
            return history
        summary = completion.text.strip()
        if not summary:
            return history
        log.info("compacted a transcript: %d older message(s) summarised, %d kept", len(old), len(recent))
        middle = [Message.user(f"{SUMMARY_OPEN}\n{summary}\n</summary>")]
        if recent[0].role == "user":
            middle.append(Message.assistant("(I have the summary.)"))
        return _merged(head + middle + recent)


def render(messages: list[Message]) -> str:
    """The turns as plain text for the summariser (tool calls and results shortened)."""
    lines = []
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                lines.append(f"{message.role}: {block.text}")
            elif isinstance(block, ToolUseBlock):
                lines.append(f"{message.role} called {block.name}({json.dumps(block.input, ensure_ascii=False)[:300]})")
            elif isinstance(block, ToolResultBlock):
                lines.append(f"tool result: {str(block.content)[:300]}")
    text = "\n".join(lines)
    return text[-_TRANSCRIPT_CHARS:]


def safe_cut(messages: list[Message], at_most: int, *, floor: int = 0) -> int | None:
    """The latest index in (floor, at_most] where recent turns may start without splitting a tool call from its result.

    That is an assistant message (its tool calls and their results stay together after it) or a user
    message that answers no tool call; None when there is none.
    """
    for index in range(min(at_most, len(messages) - 1), floor, -1):
        message = messages[index]
        if message.role == "assistant" or not any(isinstance(b, ToolResultBlock) for b in message.content):
            return index
    return None


def _fitting(messages: list[Message], budget_tokens: int) -> int:
    """The earliest index from which the rest of the messages fit in the budget."""
    total = 0
    for index in range(len(messages) - 1, -1, -1):
        total += estimate_tokens([messages[index]])
        if total > budget_tokens:
            return index + 1
    return 0


def _merged(messages: list[Message]) -> list[Message]:
    """Adjacent messages of one role joined, so roles keep alternating (a pinned brief then the summary)."""
    out: list[Message] = []
    for message in messages:
        if out and out[-1].role == message.role:
            content: list[Block] = [*out[-1].content, *message.content]
            out[-1] = Message(role=message.role, content=content)
        else:
            out.append(message)
    return out
