"""Callable shapes shared across layers, defined once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bicameral.events import Action, ActionResult, Inbound

Clock = Callable[[], float]
"""Seconds on a monotonic or wall clock, injected so tests control time."""

Sleep = Callable[[float], Awaitable[None]]
"""`asyncio.sleep` or a test's stand-in."""

Perform = Callable[[Action], Awaitable[ActionResult]]
"""Carries out an action on a channel and reports what happened."""

Submit = Callable[[Inbound], Awaitable[None]]
Take = Callable[[Inbound], Awaitable[Inbound | None]]  # what goes on, or None when the step kept the inbound


def sieved(take: Take, then: Submit) -> Submit:
    """`then`, for whatever `take` hands on: one step of intake that may keep a message (a press, an answer)."""

    async def forward(inbound: Inbound) -> None:
        taken = await take(inbound)
        if taken is not None:
            await then(taken)

    return forward
