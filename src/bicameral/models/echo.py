"""A model that also hands each piece of its text to a viewer as it streams (a terminal prints it live)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from bicameral.models.base import Message, Model, ModelEvent, TextDelta, ToolSpec


class EchoText:
    """Wraps a Model: the same events, and `show(text)` called for every text delta on the way."""

    def __init__(self, model: Model, show: Callable[[str], None]) -> None:
        self.inner = model
        self.name = model.name
        self._show = show

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        async for event in self.inner.stream(system, messages, tools, max_tokens):
            if isinstance(event, TextDelta):
                self._show(event.text)
            yield event
