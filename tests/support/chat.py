"""How tests wait: until what they expect is there, or through a deliberate quiet window.

A test waits for the thing itself, never for a guessed time: a text a chat received (`until_sent`), a row,
a state, a count (`eventually`). On a busy machine a fixed sleep is too short; on an idle one, too long.
The one fixed wait is a window in which something must *not* happen (no second reply, no retry, no spin),
checked by the assertion after it: `quiet_for`, with its reason. The blocking twins are for tests without an
event loop (a process driven from the test's thread, a thread of the code under test).

bench/ has its own `wait_until` (bench/harness.py): it polls every 5 ms because when a condition became
true is what it measures, and it raises TimeoutError for a run's report, not a test's assertion.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

# What a wait is for, named in its failure: a text, or a function that says it then (what was seen instead).
What = str | Callable[[], str]


async def until_sent(telegram: Any, chat: int, text: str, timeout: float = 20.0) -> None:
    """Wait until `text` was sent to `chat`, after however many messages come before it."""
    count = 1
    while text not in [m["text"] for m in await telegram.await_sent(chat, count, timeout=timeout)]:
        count = len(telegram.sent_messages(chat)) + 1


async def eventually(
    predicate: Callable[[], T] | Callable[[], Awaitable[T]],
    what: What = "the condition",
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
) -> T:
    """Wait until `predicate()` is truthy (a row exists, a state changed) and return it, checking every `interval` s.

    `predicate` may be a coroutine function. After `timeout` s the test fails naming `what`.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(what, timeout))
        await asyncio.sleep(interval)


def eventually_blocking(
    predicate: Callable[[], T], what: What = "the condition", *, timeout: float = 10.0, interval: float = 0.05
) -> T:
    """`eventually` for a test without an event loop: the same wait, blocking the test's thread."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(what, timeout))
        time.sleep(interval)


async def quiet_for(seconds: float, reason: str) -> None:
    """A deliberate fixed wait: a window in which something must not happen, checked by the assertion after it.

    `reason` says what would have shown up by then: the window is a claim about the code, written beside it.
    """
    assert reason, "say what the window gives time for"
    await asyncio.sleep(seconds)


def quiet_for_blocking(seconds: float, reason: str) -> None:
    """`quiet_for` for a test without an event loop."""
    assert reason, "say what the window gives time for"
    time.sleep(seconds)


def _timed_out(what: What, timeout: float) -> str:
    return f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}"
