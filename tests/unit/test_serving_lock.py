"""The serving lock on a real PostgreSQL: one holder at a time, handed over when a holder's session ends."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest

from bicameral.app.serving import STANDING_BY, turn_to_serve
from bicameral.store.leadership import APPLICATION_NAME, ServingLock
from bicameral.store.postgres import DatabaseUnreachable
from tests.support.chat import eventually


def _end_lock_sessions(url: str) -> int:
    """End every session holding the serving lock in this database, as a restarted server would; how many."""
    with psycopg.connect(url, autocommit=True, connect_timeout=30) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s "
            "AND datname = current_database()",
            (APPLICATION_NAME,),
        ).fetchall()
    return len(rows)


def test_one_holder_at_a_time_and_the_next_takes_it_when_the_first_lets_go(postgres_url):
    first, second = ServingLock(postgres_url), ServingLock(postgres_url)
    try:
        assert first.try_take() and first.held
        assert not second.try_take() and not second.held
        assert first.alive()
        first.close()
        assert second.try_take()
        assert not first.alive()  # closed: no longer the holder
    finally:
        first.close()
        second.close()


def test_an_ended_session_is_seen_as_the_lock_lost_and_frees_it(postgres_url):
    holder, other = ServingLock(postgres_url), ServingLock(postgres_url)
    try:
        assert holder.try_take()
        assert _end_lock_sessions(postgres_url) == 1
        assert not holder.alive()
        assert other.try_take()
    finally:
        holder.close()
        other.close()


def test_a_wrong_password_is_refused_in_one_message_without_it(postgres):
    url = postgres.url(password="not-the-real-secret")
    with pytest.raises(DatabaseUnreachable) as refused:
        ServingLock(url).connect()
    message = str(refused.value)
    assert "not-the-real-secret" not in message and "BICAMERAL_DATABASE_URL" in message
    assert "\n" not in message


async def test_without_a_url_it_serves_at_once():
    async with turn_to_serve(None, asyncio.Event()) as serving:
        assert serving


async def test_a_standby_stops_when_asked_and_a_server_hears_of_its_lost_lock(postgres_url, caplog):
    caplog.set_level(logging.INFO, logger="bicameral.app.serving")
    lost = asyncio.Event()
    stopping = asyncio.Event()
    async with turn_to_serve(postgres_url, asyncio.Event(), on_lost=lost.set) as serving:
        assert serving
        waiting = asyncio.create_task(_stand_by(postgres_url, stopping))
        await eventually(lambda: STANDING_BY in caplog.text, "the second to stand by", timeout=30)
        stopping.set()
        assert await asyncio.wait_for(waiting, 30) is False
        assert await asyncio.to_thread(_end_lock_sessions, postgres_url) == 1
        await asyncio.wait_for(lost.wait(), 30)


async def _stand_by(url: str, stopping: asyncio.Event) -> bool:
    async with turn_to_serve(url, stopping, on_lost=lambda: None) as serving:
        return serving
