"""A remote model whose adapter and SDK load in a worker thread, so the first poll need not wait for them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from bicameral.models.base import Message, Model, ModelError, ModelEvent, ToolSpec

log = logging.getLogger(__name__)


class DeferredModel:
    """Stands in for the model `load` builds; `warm` starts loading it, the first completion waits for it."""

    def __init__(self, name: str, load: Callable[[], Model]) -> None:
        self.name = name
        self._load = load
        self._loading: asyncio.Future[Model] | None = None

    def warm(self) -> None:
        """Start loading in the background (idempotent); needs a running event loop."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(asyncio.to_thread(self._load))

    async def loaded(self) -> Model:
        """The real model, once its SDK is imported; ModelError("unavailable") if it cannot be."""
        self.warm()
        assert self._loading is not None
        try:
            # Shielded: a turn cancelled while it waits must not cancel the load the next turn needs.
            return await asyncio.shield(self._loading)
        except ImportError as exc:
            raise ModelError("unavailable", f"cannot load the client library for {self.name}: {exc}") from None

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        model = await self.loaded()
        async for event in model.stream(system, messages, tools, max_tokens):
            yield event

    async def aclose(self) -> None:
        loading, self._loading = self._loading, None
        if loading is None:
            return
        try:
            model = await loading
        except Exception as exc:  # nothing was opened
            log.debug("model %s never loaded: %s", self.name, exc)
            return
        await model.aclose()
