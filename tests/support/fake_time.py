"""A clock and sleep that tests move by hand: sleepers wake when the clock passes their time."""

from __future__ import annotations

import asyncio


class FakeTime:
    def __init__(self, start: float) -> None:
        self.now = start
        self._moved = asyncio.Condition()
        self.sleeping = 0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        target = self.now + delay
        async with self._moved:
            self.sleeping += 1
            self._moved.notify_all()
            try:
                await self._moved.wait_for(lambda: self.now >= target)
            finally:
                self.sleeping -= 1

    async def advance(self, seconds: float) -> None:
        async with self._moved:
            self.now += seconds
            self._moved.notify_all()

    async def until_sleeping(self, timeout: float = 10.0) -> None:
        """Wait until something sleeps on this clock (the timer is armed)."""
        async with asyncio.timeout(timeout), self._moved:
            await self._moved.wait_for(lambda: self.sleeping > 0)
