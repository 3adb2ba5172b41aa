"""Requests fill the model API's small connection pools in order, and a lone chat keeps to the first."""

from __future__ import annotations

from contextlib import AsyncExitStack

import httpx

from bicameral.models.pools import Pools


def _pools(count: int = 3, per_pool: int = 2) -> tuple[Pools, list[httpx.AsyncClient]]:
    built: list[httpx.AsyncClient] = []

    def build() -> httpx.AsyncClient:
        built.append(httpx.AsyncClient())
        return built[-1]

    return Pools(build, count=count, per_pool=per_pool), built


async def test_one_request_at_a_time_always_reuses_the_first_pool() -> None:
    pools, built = _pools()
    for _ in range(5):
        async with pools.client() as client:
            assert client is built[0]
    assert len(built) == 1 and pools.in_flight() == [0, 0, 0]
    await pools.aclose()


async def test_pools_fill_in_order_then_the_least_busy_takes_the_rest() -> None:
    pools, built = _pools(count=3, per_pool=2)
    async with AsyncExitStack() as held:
        clients = [await held.enter_async_context(pools.client()) for _ in range(6)]
        assert pools.in_flight() == [2, 2, 2]
        assert clients == [built[0], built[0], built[1], built[1], built[2], built[2]]
        extra = await held.enter_async_context(pools.client())
        assert extra is built[0] and pools.in_flight() == [3, 2, 2]
    assert pools.in_flight() == [0, 0, 0] and len(built) == 3


async def test_a_freed_slot_in_an_earlier_pool_is_used_first() -> None:
    pools, built = _pools(count=2, per_pool=1)
    async with pools.client(), pools.client() as second:
        assert second is built[1]
    async with pools.client() as again:
        assert again is built[0]
    await pools.aclose()


async def test_closing_closes_every_client_built() -> None:
    pools, built = _pools(count=2, per_pool=1)
    async with pools.client(), pools.client():
        pass
    await pools.aclose()
    assert len(built) == 2 and all(client.is_closed for client in built)
