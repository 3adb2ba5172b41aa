"""Callable shapes shared across layers, defined once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bicameral.events import Action, ActionResult

Clock = Callable[[], float]
"""Seconds on a monotonic or wall clock, injected so tests control time."""

Sleep = Callable[[float], Awaitable[None]]
"""`asyncio.sleep` or a test's stand-in."""

Perform = Callable[[Action], Awaitable[ActionResult]]
"""Carries out an action on a channel and reports what happened."""
