"""The database's disk reserve: held while there is room, given back when the disk runs short, held again after."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from bicameral.store.db import Database
from bicameral.store.reserve import DiskReserve
from tests.support.small_disk import fill, small_disk

MiB = 1 << 20


class FakeDisk:
    """statvfs with a free space the test sets."""

    def __init__(self, free: int) -> None:
        self.free = free

    def __call__(self, path: Path) -> os.statvfs_result:
        real = os.statvfs(path)
        blocks = self.free // real.f_frsize
        return os.statvfs_result((real.f_bsize, real.f_frsize, real.f_blocks, blocks, blocks, real.f_files,
                                  real.f_ffree, real.f_favail, real.f_flag, real.f_namemax))


def test_the_reserve_is_given_back_when_the_disk_runs_short_and_held_again_when_there_is_room(tmp_path):
    disk, now, told = FakeDisk(1000 * MiB), [0.0], []
    reserve = DiskReserve(tmp_path, 4 * MiB, on_low=told.append, statvfs=disk, clock=lambda: now[0])
    assert reserve.ensure() and reserve.held() >= 4 * MiB
    reserve.check()
    assert reserve.path.exists() and not reserve.low and told == []
    disk.free = MiB  # under half the reserve: something else filled the disk
    now[0] += 5
    reserve.check()
    assert not reserve.path.exists() and reserve.low and told == [MiB]
    now[0] += 5
    reserve.check()  # still short: told once, not on every write
    assert told == [MiB]
    disk.free = 9 * MiB
    now[0] += 5
    reserve.check()
    assert reserve.restoring is not None
    reserve.restoring.join()
    assert reserve.held() >= 4 * MiB and not reserve.low


def test_a_disk_without_room_for_the_reserve_gets_none(tmp_path):
    reserve = DiskReserve(tmp_path, 4 * MiB, statvfs=FakeDisk(6 * MiB))
    assert not reserve.ensure() and not reserve.path.exists()
    assert not DiskReserve(tmp_path, 0).ensure()


def test_sqlite_finding_the_disk_full_gets_the_reserve_and_the_next_commit_goes_through(tmp_path):
    with small_disk(tmp_path / "data", 8) as data:
        db = Database(data / "bicameral.db")
        db.execute("CREATE TABLE notes (text TEXT)")
        told: list[int] = []
        db.reserve = DiskReserve(data, 2 * MiB, on_low=told.append, clock=lambda: 0.0)  # checks once, then never
        assert db.reserve.ensure()
        db.reserve.check()
        fill(data)
        failed = []
        for _ in range(200):  # until the WAL needs a page the full disk cannot give
            try:
                with db.tx() as conn:
                    conn.execute("INSERT INTO notes VALUES (?)", ("x" * 4000,))
            except sqlite3.OperationalError as exc:
                failed.append(str(exc))
                break
        assert failed == ["database or disk is full"]
        assert told and not db.reserve.path.exists()
        with db.tx() as conn:
            conn.execute("INSERT INTO notes VALUES ('after')")
        assert db.query_one("SELECT count(*) FROM notes WHERE text = 'after'")[0] == 1
        db.close()
