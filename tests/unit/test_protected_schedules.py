"""A protected schedule seeded by several workers starting at once, on both engines: one row, fired once."""

from __future__ import annotations

import pytest

from bicameral.store.schedules import ScheduleStore
from bicameral.store.sql import SqlDatabase

SEED = dict(chat="telegram:1", creator="telegram:1", body="# Self-reflection", tz="UTC", cron="0 3 * * *")


def test_a_worker_that_finds_the_schedule_seeded_under_it_keeps_the_other_workers_row(
    database: SqlDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = ScheduleStore(database), ScheduleStore(database)
    seeded = first.keep_protected("self-reflection", **SEED, next_due=100.0, now=0.0)
    real, looks = second.by_key, []

    def late(key: str):  # the second worker's first look came before the first one's row was there
        looks.append(key)
        return None if len(looks) == 1 else real(key)

    monkeypatch.setattr(second, "by_key", late)
    kept = second.keep_protected("self-reflection", **SEED, next_due=200.0, now=0.0)
    assert kept.id == seeded.id and kept.next_due == 100.0  # unchanged: its time stays
    assert len(database.query("SELECT id FROM schedules WHERE protected = 'self-reflection'")) == 1 and len(looks) == 2


def test_a_schedule_fired_by_another_worker_meanwhile_is_not_set_back_to_its_old_time(
    database: SqlDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ScheduleStore(database)
    stale = store.keep_protected("self-reflection", **SEED, next_due=100.0, now=0.0)
    assert store.fire(stale, now=101.0, next_due=86_500.0) is not None  # another worker fired it
    monkeypatch.setattr(store, "by_key", lambda key: stale)  # this one read it before that
    kept = store.keep_protected("self-reflection", **SEED, next_due=100.0, now=0.0)
    assert kept.next_due == 86_500.0, "the old due time written back would fire it twice"
