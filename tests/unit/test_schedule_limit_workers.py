"""The per-person schedule limit holds across workers: two processes creating at once cannot both pass the count.

On PostgreSQL (READ COMMITTED) the count and the insert are two statements; a second worker that counts while the
first one's insert is uncommitted would see room and go over. The create transactions of one person wait for each
other instead.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import psycopg
import pytest

from bicameral.store import open_database
from bicameral.store.schedules import ScheduleLimitError, ScheduleStore


def _create(store: ScheduleStore, limit: int) -> None:
    store.create(chat="tg:2", creator="tg:7", kind="text", body="second", tz="UTC", next_due=2e9, now=1e9,
                 limit=limit)


def test_a_second_worker_waits_for_the_first_ones_create_and_finds_the_limit_reached(postgres_url: str) -> None:
    first, second = open_database(postgres_url), open_database(postgres_url)
    try:
        first.migrate()
        other = ScheduleStore(second)
        with ThreadPoolExecutor(1) as pool:
            outcome: Future[None]
            with first.tx(serial="schedules of tg:7") as conn:  # worker one, between its count and its commit
                conn.execute(
                    """INSERT INTO schedules (chat, creator, kind, body, tz, next_due, created_at)
                       VALUES ('tg:1', 'tg:7', 'text', 'first', 'UTC', 2e9, 1e9)"""
                )
                outcome = pool.submit(_create, other, 1)
                blocked = _waits_on_a_lock(postgres_url, outcome)
                assert blocked, "the second create did not wait for the first one's transaction"
            with pytest.raises(ScheduleLimitError):
                outcome.result(timeout=60)
        assert [row["body"] for row in first.query("SELECT body FROM schedules")] == ["first"]
    finally:
        first.close()
        second.close()


def test_other_people_are_not_held_up(postgres_url: str) -> None:
    first, second = open_database(postgres_url), open_database(postgres_url)
    try:
        first.migrate()
        with first.tx(serial="schedules of tg:8"):
            _create(ScheduleStore(second), 1)  # another person's lock: no wait, or this would never return
        assert len(second.query("SELECT id FROM schedules")) == 1
    finally:
        first.close()
        second.close()


def _waits_on_a_lock(url: str, create: Future[None]) -> bool:
    """Whether the create waits on an advisory lock (polled: the wait happens on the server) rather than finishing."""
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as admin:
        while time.monotonic() < deadline and not create.done():
            row = admin.execute("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
            if row and row[0]:
                return True
            time.sleep(0.05)
    return False
