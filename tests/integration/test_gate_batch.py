"""The gate stores a batch in one transaction, skips a poisoned message, and loses nothing to a storage error."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from bicameral.app import gate_config
from bicameral.config import Settings
from bicameral.delivery.router import ActionRouter
from bicameral.events import AttachmentRef, Inbound, Sender
from bicameral.gate.access import AccessConfig, AccessPolicy
from bicameral.gate.gate import Gate
from bicameral.gate.ratelimit import RateLimiter
from bicameral.store import Stores

OWNER = 1


def _message(n: int, text: str = "hello") -> Inbound:
    return Inbound(
        channel="telegram",
        chat=f"telegram:{100 + n}",
        message_id=str(n),
        sender=Sender(id=str(100 + n), name=f"user {n}"),
        text=f"{text} {n}",
        ts=0.0,
        update_id=n,
    )


class _Setup:
    def __init__(self, tmp_path: Path) -> None:
        settings = Settings.for_test(tmp_path, owner_id=OWNER)
        self.stores = Stores.open(settings.data_dir / "bicameral.db")
        access = AccessPolicy(settings.data_dir / "access.json", OWNER)
        access.save(AccessConfig(policy="open"))
        self.forwarded: list[Inbound] = []

        async def forward(inbound: Inbound) -> None:
            self.forwarded.append(inbound)

        limiter = RateLimiter(self.stores.ratelimits, per_minute=100)
        self.gate = Gate(gate_config(settings), access, self.stores, ActionRouter(self.stores.messages), forward, limiter)
        self.statements: list[str] = []
        self.stores.db._conn.set_trace_callback(self.statements.append)

    def stored(self) -> list[str]:
        return [r["message_id"] for r in self.stores.db.query("SELECT message_id FROM messages ORDER BY id")]


@pytest.fixture
def setup(tmp_path: Path) -> _Setup:
    return _Setup(tmp_path)


async def test_a_batch_is_stored_in_one_transaction_however_long(setup: _Setup) -> None:
    await setup.gate([_message(n) for n in range(50)])
    assert setup.stored() == [str(n) for n in range(50)]
    assert [i.message_id for i in setup.forwarded] == [str(n) for n in range(50)]
    assert all(i.row_id is not None for i in setup.forwarded)
    assert setup.statements.count("BEGIN IMMEDIATE") == 1
    assert setup.stores.db.query_one("SELECT count(*) FROM rate_limits")[0] == 50  # every sender was counted


async def test_a_poisoned_message_is_skipped_and_the_rest_of_the_batch_goes_on(
    setup: _Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = setup.stores.messages.record_inbound

    def poisoned(inbound: Inbound, status: str) -> int | None:
        row = record(inbound, status)  # written, then the step fails: its write must be undone
        if inbound.message_id == "1":
            raise ValueError("a message no one foresaw")
        return row

    monkeypatch.setattr(setup.stores.messages, "record_inbound", poisoned)
    await setup.gate([_message(0), _message(1), _message(2)])
    assert setup.stored() == ["0", "2"]
    assert [i.message_id for i in setup.forwarded] == ["0", "2"]


async def test_a_storage_error_stores_none_of_the_batch_so_offering_it_again_stores_each_once(
    setup: _Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = setup.stores.messages.record_inbound
    failing = {"2"}

    def disk_full_on_the_third(inbound: Inbound, status: str) -> int | None:
        if inbound.message_id in failing:
            raise sqlite3.OperationalError("database or disk is full")
        return record(inbound, status)

    monkeypatch.setattr(setup.stores.messages, "record_inbound", disk_full_on_the_third)
    batch = [_message(n) for n in range(4)]
    with pytest.raises(sqlite3.OperationalError):
        await setup.gate(batch)
    assert setup.stored() == [] and setup.forwarded == []  # not acknowledged, so nothing half-kept

    failing.clear()  # space again: the channel offers the same batch
    await setup.gate(batch)
    assert setup.stored() == ["0", "1", "2", "3"]
    assert [i.message_id for i in setup.forwarded] == ["0", "1", "2", "3"]


async def test_a_refused_sender_is_recorded_while_the_others_are_stored(setup: _Setup) -> None:
    setup.gate.access.save(AccessConfig(policy="owner_only"))
    owner = Inbound(
        channel="telegram", chat=f"telegram:{OWNER}", message_id="9", sender=Sender(id=str(OWNER), name="Owner"),
        text="hi", ts=0.0, update_id=9,
    )
    await setup.gate([_message(0), owner])
    assert setup.stored() == ["9"]
    assert setup.stores.db.query_one("SELECT count(*) FROM unauthorized_messages")[0] == 1


class _Downloads:
    """A channel whose files arrive after an await, like a real download."""

    name = "telegram"

    def __init__(self, db_in_transaction: Callable[[], bool]) -> None:
        self._in_transaction = db_in_transaction
        self.held_a_transaction = False

    async def fetch_attachments(self, inbound: Inbound) -> Inbound:
        await asyncio.sleep(0)
        self.held_a_transaction |= self._in_transaction()
        return dataclasses.replace(inbound, attachment_refs=())


async def test_files_are_downloaded_between_two_transactions_never_inside_one(setup: _Setup) -> None:
    channel = _Downloads(lambda: setup.stores.db._conn.in_transaction)
    setup.gate._router.register(channel)  # type: ignore[arg-type]
    with_file = dataclasses.replace(_message(1), attachment_refs=(AttachmentRef(kind="document", file_id="f", name="a.txt"),))
    await setup.gate([_message(0), with_file])
    assert setup.stored() == ["0", "1"]
    assert setup.statements.count("BEGIN IMMEDIATE") == 2
    assert not channel.held_a_transaction


class _BrokenDownloads:
    name = "telegram"

    def __init__(self, error: Exception) -> None:
        self._error = error

    async def fetch_attachments(self, inbound: Inbound) -> Inbound:
        raise self._error


def _with_file(n: int) -> Inbound:
    return dataclasses.replace(_message(n), attachment_refs=(AttachmentRef(kind="photo", file_id="f", name="p.jpg"),))


async def test_a_download_that_fails_oddly_skips_its_message_only(setup: _Setup) -> None:
    setup.gate._router.register(_BrokenDownloads(ValueError("unexpected answer")))  # type: ignore[arg-type]
    await setup.gate([_message(0), _with_file(1), _message(2)])
    assert setup.stored() == ["0", "2"]


async def test_a_full_disk_while_downloading_stores_none_of_the_batch(setup: _Setup) -> None:
    setup.gate._router.register(_BrokenDownloads(OSError(28, "No space left on device")))  # type: ignore[arg-type]
    with pytest.raises(OSError):
        await setup.gate([_message(0), _with_file(1)])
    assert setup.stored() == [] and setup.forwarded == []
