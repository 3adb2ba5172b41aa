"""Several small httpx connection pools, filled in order, so hundreds of requests at once stay cheap.

httpcore scans its whole pool whenever a request starts or a response closes, and for each idle
connection counts every connection again: a pool of n connections costs O(n²) per request. With
200 chats waiting on a model at once that bookkeeping took half the process's CPU. Pools of at
most `per_pool` requests keep each scan short, and a lone chat still reuses one warm connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx

POOL_SIZE = 32  # requests per pool before the next one is used; each scan then stays under ~1,000 steps

class Pools:
    """Lends a client for the length of one request: the first pool with room, else the least busy."""

    def __init__(self, build: Callable[[], httpx.AsyncClient], *, count: int = 8, per_pool: int = POOL_SIZE) -> None:
        self._build = build
        self._per_pool = per_pool
        self._clients: list[httpx.AsyncClient | None] = [None] * count
        self._in_flight = [0] * count

    @asynccontextmanager
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        """A client to send one request on; hold it until that response is closed."""
        index = self._pick()
        client = self._clients[index]
        if client is None:
            client = self._clients[index] = self._build()
        self._in_flight[index] += 1
        try:
            yield client
        finally:
            self._in_flight[index] -= 1

    def in_flight(self) -> list[int]:
        """Requests under way per pool, in fill order."""
        return list(self._in_flight)

    async def aclose(self) -> None:
        clients, self._clients = self._clients, [None] * len(self._clients)
        for client in clients:
            if client is not None:
                await client.aclose()

    def _pick(self) -> int:
        for index, busy in enumerate(self._in_flight):
            if busy < self._per_pool:
                return index
        return min(range(len(self._in_flight)), key=self._in_flight.__getitem__)
