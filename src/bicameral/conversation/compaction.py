"""Session compaction: past a token budget, older turns become a summary and recent ones stay verbatim.

Before anything is summarised away, its durable facts are flushed to memory, so nothing the user
told the assistant is lost with the detail of old turns.
"""

from __future__ import annotations

import json
import logging

from bicameral.conversation.extraction import FactExtractor
from bicameral.models.base import Message, Model, ModelError, TextBlock, ToolResultBlock, ToolUseBlock, complete
from bicameral.store.memory_scopes import Reach

log = logging.getLogger(__name__)

SUMMARY_OPEN = "<summary of the earlier conversation>"
SYSTEM = """Summarise the earlier part of a conversation between a user and their assistant, so the assistant
can carry on without it. Keep what later turns may depend on: open requests and promises, decisions, names,
numbers, files and links, and the user's stated preferences. Plain prose or short bullets; no preamble."""
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

    async def compact(self, history: list[Message], reach: Reach | None) -> list[Message]:
        """The history itself while it fits; else [summary, ack, *recent turns], facts flushed first."""
        if self._budget <= 0 or estimate_tokens(history) <= self._budget:
            return history
        cut = _clean_cut(history, len(history) - self._keep)
        if cut <= 0:
            return history
        old, recent = history[:cut], history[cut:]
        transcript = render(old)
        if reach is not None:
            await self._extractor.flush(reach, transcript)
        try:
            completion = await complete(self._model, SYSTEM, [Message.user(transcript)], [], 1200)
        except ModelError as exc:
            log.warning("could not summarise the session (%s); keeping it as it is", exc.kind)
            return history
        summary = completion.text.strip()
        if not summary:
            return history
        log.info("compacted a session: %d older message(s) summarised, %d kept", len(old), len(recent))
        head = [Message.user(f"{SUMMARY_OPEN}\n{summary}\n</summary>"), Message.assistant("(I have the summary.)")]
        return head + recent


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


def _clean_cut(messages: list[Message], at_most: int) -> int:
    """The latest index at or before `at_most` where a user turn opens (not a tool result), else 0."""
    for index in range(min(at_most, len(messages) - 1), 0, -1):
        message = messages[index]
        if message.role == "user" and not any(isinstance(b, ToolResultBlock) for b in message.content):
            return index
    return 0
