"""Several workers over one outbox table, on both engines: each entry attempted by one worker at a time and delivered
once, in order per chat; a dead recorder's entries taken over once their claim lapses; late results fenced off."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bicameral.delivery.outbox import Outbox
from bicameral.delivery.router import ActionRouter
from bicameral.events import Action, ActionResult, Inbound, Sender, SendText, Typing
from bicameral.store import open_database
from bicameral.store.db import Database
from bicameral.store.leases import LeaseStore
from bicameral.store.messages import MessageStore
from bicameral.store.outbox import SENT, Claim, OutboxStore
from bicameral.store.sql import Connection, SqlDatabase
from tests.support.chat import eventually

CHATS = [f"stub:{n}" for n in range(4)]
CHAT = CHATS[0]
FENCED = "this chat is served by another worker now"


class _Channel:
    """Accepts everything, yielding in the middle of each send so two workers' deliveries interleave."""

    name = "stub"

    def __init__(self, worker: str, delivered: list[tuple[str, str, str]]) -> None:
        self.worker = worker
        self.delivered = delivered  # shared by both workers' channels: the order things reached the chats
        self.seen: list[Action] = []

    async def perform(self, action: Action) -> ActionResult:
        self.seen.append(action)
        if not isinstance(action, SendText):
            return ActionResult(ok=True)
        await asyncio.sleep(0)
        self.delivered.append((self.worker, action.chat, action.text))
        await asyncio.sleep(0)
        return ActionResult(ok=True, message_ids=(str(len(self.delivered)),))


def _router(channel: _Channel) -> ActionRouter:
    router = ActionRouter()
    router.register(channel)  # type: ignore[arg-type]
    return router


@pytest.fixture
def two_databases(database_location: Path | str) -> Iterator[tuple[SqlDatabase, SqlDatabase]]:
    """Two connections to one database, as two worker processes have."""
    first, second = open_database(database_location), open_database(database_location)
    yield first, second
    first.close()
    second.close()


class _CountingStore(OutboxStore):
    """Counts the claims tried: a worker must not keep trying an entry another live worker holds."""

    claims = 0

    def claim(self, entry_id: int, claim: Claim, now: float) -> bool:
        self.claims += 1
        return super().claim(entry_id, claim, now)


async def _settle_loop() -> None:
    """Let the outboxes' loops run whatever they would do now (database calls are synchronous: no I/O to wait for)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def test_two_workers_deliver_every_entry_once_and_each_chat_in_order(
    two_databases: tuple[SqlDatabase, SqlDatabase],
) -> None:
    db_a, db_b = two_databases
    store_a, store_b = OutboxStore(db_a), OutboxStore(db_b)
    delivered: list[tuple[str, str, str]] = []
    a = Outbox(store_a, _router(_Channel("a", delivered)), worker="a")
    b = Outbox(store_b, _router(_Channel("b", delivered)), worker="b")
    # Left unclaimed (by a single process before, or recorded without a worker): both workers race for every head.
    for index in range(6):
        for chat in CHATS:
            store_a.add([SendText(chat=chat, text=f"{chat} left {index}")], [0.0])
    await a.start()
    await b.start()
    try:
        await eventually(lambda: not store_b.pending(), "every unclaimed entry delivered")
        # Then each records replies for the chats it serves, a part sent at once and the rest after pauses.
        sends = [
            worker.send([SendText(chat=chat, text=f"{chat} reply {part}") for part in range(3)], pauses=[0.0, 0.01, 0.01])
            for worker, chats in ((a, CHATS[:2]), (b, CHATS[2:]))
            for chat in chats
        ]
        results = await asyncio.gather(*sends)
        assert all(result.ok for sent in results for result in sent)
        await eventually(lambda: not store_a.pending(), "every reply delivered")
    finally:
        await a.stop()
        await b.stop()

    texts = [text for _, _, text in delivered]
    assert all(count == 1 for count in Counter(texts).values()), Counter(texts).most_common(3)
    for chat in CHATS:
        expected = [f"{chat} left {i}" for i in range(6)] + [f"{chat} reply {part}" for part in range(3)]
        assert [text for _, to, text in delivered if to == chat] == expected
    # The replies went out from the worker that recorded them.
    assert {(worker, to) for worker, to, text in delivered if "reply" in text} == {
        ("a", CHATS[0]), ("a", CHATS[1]), ("b", CHATS[2]), ("b", CHATS[3])
    }


def test_one_of_several_racing_workers_claims_an_entry_and_another_only_once_the_claim_lapsed(
    database_location: Path | str,
) -> None:
    databases = [open_database(database_location) for _ in range(4)]
    try:
        stores = [OutboxStore(db) for db in databases]
        [entry] = stores[0].add([SendText(chat=CHAT, text="hi")], [1000.0])
        start = threading.Barrier(len(stores))
        won: list[str] = []

        def race(index: int) -> None:
            start.wait()
            if stores[index].claim(entry.id, Claim(f"w{index}", 60.0), now=1000.0):
                won.append(f"w{index}")

        threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1
        holder, rival = won[0], "w9"
        assert stores[0].claim(entry.id, Claim(holder, 60.0), now=1030.0)  # its own: extended to 1090
        assert not stores[1].claim(entry.id, Claim(rival, 60.0), now=1060.0)
        assert stores[1].claim(entry.id, Claim(rival, 60.0), now=1091.0)  # lapsed: the holder died
        stores[1].finish(entry.id, SENT)
        assert not stores[0].claim(entry.id, Claim(holder, 60.0), now=2000.0)  # sent: nobody claims it again
    finally:
        for db in databases:
            db.close()


def test_a_living_worker_keeps_its_claims_and_a_dead_ones_lapse_a_claim_after_its_last_renewal(
    database_location: Path | str,
) -> None:
    db = open_database(database_location)
    try:
        store = OutboxStore(db)
        alive, dead = Claim("alive", 30.0), Claim("dead", 30.0)
        [kept] = store.add([SendText(chat=CHAT, text="kept")], [1000.0], claim=alive)
        [left] = store.add([SendText(chat="telegram:2", text="left")], [1000.0], claim=dead)
        [later] = store.add([SendText(chat="telegram:3", text="due later")], [1100.0], claim=alive)  # until 1130
        assert store.renew_claims(alive, now=1020.0) == 1  # 1030 → 1050; the later one keeps its 1130
        assert store.renew_claims(alive, now=1040.0) == 1  # → 1070: nobody else takes it while "alive" lives
        rival = Claim("rival", 30.0)
        assert not store.claim(kept.id, rival, now=1060.0)
        assert store.claim(left.id, rival, now=1060.0)  # not renewed since 1000: lapsed at 1030
        assert not store.claim(later.id, rival, now=1120.0)  # due later: still covered, never shortened
    finally:
        db.close()


async def test_a_dead_recorders_entry_goes_out_from_another_worker_once_its_claim_lapsed(
    two_databases: tuple[SqlDatabase, SqlDatabase],
) -> None:
    db_a, db_b = two_databases
    now = [1000.0]
    delivered: list[tuple[str, str, str]] = []
    store_a = OutboxStore(db_a, clock=lambda: now[0], redact=lambda text: text.replace("hunter2", "[redacted]"))
    a = Outbox(store_a, _router(_Channel("a", delivered)), worker="a", claim_seconds=60.0, clock=lambda: now[0])
    # A sends the first part at once and records the second for 30 s later; then it dies (its loop never runs).
    first, second = await a.send(
        [SendText(chat=CHAT, text="one"), SendText(chat=CHAT, text="the password is hunter2")], pauses=[0.0, 30.0]
    )
    assert first.ok and not first.queued and second.queued
    [left] = store_a.pending()
    assert (left.worker, left.claimed_until) == ("a", 1090.0)

    store_b = _CountingStore(db_b, clock=lambda: now[0])
    b = Outbox(store_b, _router(_Channel("b", delivered)), worker="b", claim_seconds=60.0, clock=lambda: now[0])
    await b.start()
    try:
        for moment in (1000.0, 1060.0, 1090.0):  # due since 1030, but A's until 1090 (a claim lapses after it)
            now[0] = moment
            b.wake()
            await _settle_loop()
            assert [text for _, _, text in delivered] == ["one"]
        assert store_b.claims == 0  # B waited for A's claim to lapse instead of trying again and again
        [still] = store_b.pending()
        assert (still.worker, still.attempts) == ("a", 0)
        now[0] = 1091.0
        b.wake()
        await eventually(lambda: len(delivered) == 2, "the dead worker's entry delivered by the other")
    finally:
        await b.stop()
    # B never held the original: it sends the stored, redacted text, as a restart would.
    assert delivered[1] == ("b", CHAT, "the password is [redacted]")
    assert store_b.pending() == [] and store_b.state_of(left.id) == SENT


async def test_an_idle_worker_sends_what_a_dead_one_left_once_its_claim_lapsed(
    two_databases: tuple[SqlDatabase, SqlDatabase],
) -> None:
    db_a, db_b = two_databases
    now = [1000.0]
    delivered: list[tuple[str, str, str]] = []
    b = Outbox(OutboxStore(db_b), _router(_Channel("b", delivered)), worker="b", claim_seconds=30.0,
               clock=lambda: now[0])
    await b.start()  # nothing to send: its loop waits to be woken
    try:
        await _settle_loop()
        # Meanwhile A recorded an answer and died before sending it; nothing of B's own wakes B's loop.
        OutboxStore(db_a).add([SendText(chat=CHAT, text="left by a")], [1000.0], claim=Claim("a", 30.0))
        now[0] = 1031.0  # A's claim lapsed at 1030
        b.renew_claims()  # the shared turns' tick, every third of a lease
        await eventually(lambda: delivered == [("b", CHAT, "left by a")], "the dead worker's answer sent by B")
    finally:
        await b.stop()


async def test_a_worker_that_lost_the_chat_records_nothing_and_answers_nothing(
    database: SqlDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    leases, messages = LeaseStore(database), MessageStore(database)
    lost = leases.claim(CHAT, "a", now=100.0, ttl=30.0)
    taken = leases.claim(CHAT, "b", now=131.0, ttl=30.0)  # A paused past its lease; B took the chat over
    assert lost is not None and taken is not None
    fenced: list[str] = []

    def fence_a(conn: Connection, chat: str) -> bool:
        fenced.append(chat)
        return leases.holds(conn, lost, now=132.0)

    def fence_b(conn: Connection, chat: str) -> bool:
        return leases.holds(conn, taken, now=132.0)

    delivered: list[tuple[str, str, str]] = []
    channel = _Channel("a", delivered)
    store = OutboxStore(database)
    a = Outbox(store, _router(channel), worker="a", fence=fence_a)
    row = messages.record_inbound(
        Inbound(channel="stub", chat=CHAT, message_id="7", sender=Sender(id="1", name="U"), text="hi", ts=1.0)
    )
    assert row is not None

    with caplog.at_level(logging.INFO, logger="bicameral.delivery.outbox"):
        results = await a.send([SendText(chat=CHAT, text="late"), SendText(chat=CHAT, text="later")], answers=[row])
        single = await a.perform(SendText(chat=CHAT, text="late too"), turn="turn-1")
    assert results == [ActionResult.failed(FENCED)] * 2 and single == ActionResult.failed(FENCED)
    assert [r.getMessage() for r in caplog.records].count(f"late result dropped: 2 message(s) to {CHAT}, {FENCED}") == 1
    assert store.pending() == [] and database.query_one("SELECT COUNT(*) FROM outbox")[0] == 0  # type: ignore[index]
    assert delivered == [] and store.held_rows() == set()

    assert (await a.perform(Typing(chat=CHAT))).ok  # cosmetic: straight to the channel, never fenced
    assert isinstance(channel.seen[-1], Typing) and fenced == [CHAT, CHAT]

    a.settle("turn-1", [row], chat=CHAT)
    a.settle("turn-1", [row])  # the chat read from the inbound row
    assert fenced == [CHAT] * 4 and messages.pending_count() == 1  # consumed nothing

    # The chat's holder now: its reply is recorded and its settle answers the row.
    b = Outbox(store, _router(_Channel("b", delivered)), worker="b", fence=fence_b)
    [reply] = await b.send([SendText(chat=CHAT, text="answer")], turn="turn-2")
    assert reply.ok and [text for _, _, text in delivered] == ["answer"]
    b.settle("turn-2", [row])
    assert messages.pending_count() == 0


class _SlowThenFine(_Channel):
    """Asks to slow down once, then accepts."""

    async def perform(self, action: Action) -> ActionResult:
        if isinstance(action, SendText) and not self.seen:
            self.seen.append(action)
            return ActionResult(ok=False, error="Too Many Requests", retry_after=0.01)
        return await super().perform(action)


async def test_a_single_process_claims_nothing(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite")
    statements: list[str] = []
    db._conn.set_trace_callback(statements.append)  # every statement the store runs on SQLite's one connection
    store = OutboxStore(db)
    delivered: list[tuple[str, str, str]] = []
    outbox = Outbox(store, _router(_SlowThenFine("solo", delivered)), retry_base=0.01, retry_cap=0.01)
    await outbox.start()
    try:
        [first] = await outbox.send([SendText(chat=CHAT, text="hi")])
        assert first.queued  # slowed down: the loop retries it
        await eventually(lambda: delivered, "the retried message delivered")
    finally:
        await outbox.stop()
        db._conn.set_trace_callback(None)
    assert [text for _, _, text in delivered] == ["hi"]
    writes = [sql for sql in statements if sql.lstrip().startswith(("INSERT", "UPDATE"))]
    assert writes and not [sql for sql in writes if "claimed_until" in sql or "worker" in sql]
    assert [tuple(row) for row in db.query("SELECT worker, claimed_until FROM outbox")] == [(None, None)]
    db.close()


async def test_a_stop_that_comes_with_a_wake_up_still_ends_the_loop(tmp_path: Path) -> None:
    # Python 3.11's wait_for returns the wake-up and drops a cancel that comes at the same moment: the loop must end
    # all the same, or `stop` (and the app's) waits for ever.
    db = open_database(tmp_path / "bicameral.db")
    try:
        store = OutboxStore(db)
        store.add([SendText(chat=CHAT, text="later")], [time.time() + 600])
        outbox = Outbox(store, _router(_Channel("a", [])))
        await outbox.start()
        await _settle_loop()  # the loop waits until the message falls due, or a wake-up
        outbox.wake()
        stopping = asyncio.ensure_future(outbox.stop())
        _, waiting = await asyncio.wait({stopping}, timeout=10)  # not wait_for: `stop` must end on its own
        for task in waiting:
            task.cancel()
        assert not waiting, "the outbox's loop did not end: stop waited on it"
    finally:
        db.close()
