"""Chat leases on both engines: one holder at a time, taken over once lapsed, and a lapsed holder's result fenced off."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bicameral.store import open_database
from bicameral.store.leases import Lease, LeaseStore
from bicameral.store.sql import SqlDatabase
from tests.support.chat import eventually_blocking

CHAT = "telegram:1001"
TTL = 30.0


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path: Path):
    location = request.getfixturevalue("postgres_url") if request.param == "postgresql" else tmp_path / "bicameral.db"
    opened = open_database(location)
    yield opened
    opened.close()


def test_one_holder_at_a_time_and_the_holder_extends_its_own(db: SqlDatabase) -> None:
    leases = LeaseStore(db)
    first = leases.claim(CHAT, "w1", now=100.0, ttl=TTL)
    assert first == Lease(CHAT, "w1", 1, 130.0)
    assert leases.claim(CHAT, "w2", now=120.0, ttl=TTL) is None  # still w1's
    again = leases.claim(CHAT, "w1", now=120.0, ttl=TTL)
    assert again == Lease(CHAT, "w1", 1, 150.0)  # its own: extended, same number
    assert leases.renew([again], now=140.0, ttl=TTL) == {CHAT: Lease(CHAT, "w1", 1, 170.0)}
    assert leases.claim("telegram:2002", "w2", now=140.0, ttl=TTL) is not None  # other chats are free


def test_a_lapsed_lease_is_taken_over_with_a_new_number_and_the_old_holder_is_fenced_off(db: SqlDatabase) -> None:
    leases = LeaseStore(db)
    old = leases.claim(CHAT, "w1", now=100.0, ttl=TTL)
    assert old is not None
    # w1 paused past its deadline: w2 takes the chat over.
    new = leases.claim(CHAT, "w2", now=131.0, ttl=TTL)
    assert new == Lease(CHAT, "w2", 2, 161.0)
    assert leases.renew([old], now=132.0, ttl=TTL) == {}
    with db.tx() as conn:
        assert not leases.holds(conn, old, now=132.0)  # w1's late result is dropped
    with db.tx() as conn:
        assert leases.holds(conn, new, now=132.0)
    # A holder that comes back after its own deadline, with nobody else there yet, is refused too: it must claim again.
    with db.tx() as conn:
        assert not leases.holds(conn, new, now=162.0)
    assert leases.claim(CHAT, "w2", now=162.0, ttl=TTL) == Lease(CHAT, "w2", 3, 192.0)


def test_release_frees_the_chat_and_a_stale_release_frees_nothing(db: SqlDatabase) -> None:
    leases = LeaseStore(db)
    old = leases.claim(CHAT, "w1", now=100.0, ttl=TTL)
    assert old is not None
    new = leases.claim(CHAT, "w2", now=200.0, ttl=TTL)
    assert new is not None
    leases.release([old])  # w1's release after losing the chat: w2 keeps it
    assert leases.holder(CHAT) == new
    leases.release([new])
    assert leases.holder(CHAT) is None
    assert leases.claim(CHAT, "w1", now=201.0, ttl=TTL) is not None


def test_on_postgresql_a_takeover_waits_for_the_holder_committing_its_result(postgres_url: str) -> None:
    holder_db, rival_db = open_database(postgres_url), open_database(postgres_url)
    try:
        holding, rival = LeaseStore(holder_db), LeaseStore(rival_db)
        lease = holding.claim(CHAT, "w1", now=100.0, ttl=TTL)
        assert lease is not None
        taken: list[Lease | None] = []
        started = threading.Event()

        def take_over() -> None:
            started.set()
            taken.append(rival.claim(CHAT, "w2", now=131.0, ttl=TTL))  # past w1's deadline by the clock it passes

        watcher = open_database(postgres_url)
        with holder_db.tx() as conn:
            assert holding.holds(conn, lease, now=129.0)  # checked in time: the row is w1's until this commits
            thread = threading.Thread(target=take_over)
            thread.start()
            started.wait(10)
            # The rival waits on the row lock (the server says so); it has not taken the chat.
            eventually_blocking(
                lambda: watcher.query_one(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )[0] == 1,
                "the rival's claim to wait on the lease row", timeout=30,
            )
            assert taken == []
        thread.join(30)
        watcher.close()
        assert taken == [Lease(CHAT, "w2", 2, 161.0)]
    finally:
        holder_db.close()
        rival_db.close()


def test_a_lapsed_lease_nobody_took_is_revived_but_not_one_taken_and_let_go(db: SqlDatabase) -> None:
    leases = LeaseStore(db)
    mine = leases.claim(CHAT, "w1", now=100.0, ttl=TTL)
    assert mine is not None
    assert leases.renew([mine], now=200.0, ttl=TTL) == {}  # run out
    assert leases.revive(mine, now=200.0, ttl=TTL) == Lease(CHAT, "w1", 1, 230.0)  # nobody took it: still w1's
    taken = leases.claim(CHAT, "w2", now=300.0, ttl=TTL)
    assert taken is not None
    leases.release([taken])  # w2 answered what waited and let the chat go
    assert leases.revive(mine, now=300.0, ttl=TTL) is None  # w1's late work is not revived


def test_many_leases_are_claimed_renewed_and_released_in_one_statement_each(db: SqlDatabase) -> None:
    leases = LeaseStore(db)
    chats = [f"telegram:{3000 + i}" for i in range(5)]
    assert leases.claim("telegram:3002", "w2", now=100.0, ttl=TTL) is not None  # one is another worker's
    with db.tx() as conn:
        won = leases.claim_in(conn, chats, "w1", now=100.0, ttl=TTL)
    assert sorted(won) == [c for c in chats if c != "telegram:3002"]
    assert all(lease == Lease(lease.chat, "w1", 1, 130.0) for lease in won.values())
    # One of w1's lapses and w2 takes it: the renewal keeps the others, with their new deadline, and not that one.
    assert leases.claim("telegram:3000", "w2", now=131.0, ttl=TTL) is not None
    held = list(won.values())
    renewed = leases.renew(held, now=131.0, ttl=TTL)
    assert renewed == {}  # all lapsed at 130: none renewed (a lapsed one is revived, one by one)
    renewed = leases.renew(held[1:], now=125.0, ttl=TTL)
    assert renewed == {lease.chat: Lease(lease.chat, "w1", 1, 155.0) for lease in held[1:]}
    leases.release(held)  # telegram:3000 is w2's now: left alone
    assert leases.holder("telegram:3000") is not None and leases.holder("telegram:3000").worker == "w2"
    assert [leases.holder(lease.chat) for lease in held[1:]] == [None] * (len(held) - 1)
