"""Which chat a model call is for: set where a turn or a task step runs, read by the metering and the model choice."""

from __future__ import annotations

from contextvars import ContextVar

# An asyncio task copies the context it is created in, so a call made by anything a turn or a task starts (a
# compaction, a fact extraction, a sub-agent) is counted for the same chat. None: no chat (a check, a test).
current_chat: ContextVar[str | None] = ContextVar("bicameral_current_chat", default=None)
