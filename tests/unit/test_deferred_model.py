"""A deferred model loads its adapter once, in a worker thread, and survives a cancelled caller."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from bicameral.models.base import Message, ModelError, ModelEvent, TextDelta, ToolSpec, complete
from bicameral.models.deferred import DeferredModel


class Scripted:
    """A model that answers "hi" and records whether it was closed."""

    name = "scripted"

    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        yield TextDelta("hi")


class Loader:
    """Builds the model on whichever thread calls it, once the test allows."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.allowed = threading.Event()
        self.model = Scripted()

    def __call__(self) -> Scripted:
        self.calls.append(threading.current_thread().name)
        assert self.allowed.wait(10)
        return self.model


async def test_loads_once_off_the_event_loop_thread() -> None:
    loader = Loader()
    model = DeferredModel("openai:x", loader)
    model.warm()
    model.warm()
    waiting = asyncio.create_task(complete(model, "", [Message.user("hello")], [], 8))
    await asyncio.sleep(0)
    assert not waiting.done()  # the first completion waits for the load
    loader.allowed.set()
    assert (await waiting).text == "hi"
    assert (await complete(model, "", [Message.user("again")], [], 8)).text == "hi"
    assert len(loader.calls) == 1 and loader.calls[0] != threading.current_thread().name
    await model.aclose()
    assert loader.model.closed


async def test_a_cancelled_caller_does_not_cancel_the_load() -> None:
    loader = Loader()
    model = DeferredModel("openai:x", loader)
    first = asyncio.create_task(complete(model, "", [Message.user("hello")], [], 8))
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    loader.allowed.set()
    assert (await complete(model, "", [Message.user("hello")], [], 8)).text == "hi"
    assert len(loader.calls) == 1


async def test_a_missing_client_library_is_a_model_error() -> None:
    def missing() -> Scripted:
        raise ModuleNotFoundError("No module named 'openai'")

    model = DeferredModel("openai:x", missing)
    with pytest.raises(ModelError) as caught:
        await complete(model, "", [Message.user("hello")], [], 8)
    assert caught.value.kind == "unavailable" and "openai" in str(caught.value)
    await model.aclose()  # nothing was opened; closing is still fine


async def test_closing_a_model_that_never_loaded_loads_nothing() -> None:
    loader = Loader()
    await DeferredModel("openai:x", loader).aclose()
    assert loader.calls == []
