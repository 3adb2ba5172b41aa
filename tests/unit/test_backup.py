"""Backups on real files and a real SQLite database: what goes in, and every backup restore refuses untouched."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import sqlite3
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bicameral.app.backups import NightlyBackups, backup_dir
from bicameral.backup import BackupError, BackupPlan, RunningLock, is_running, make_backup, restore_backup
from bicameral.backup.archive import last_backup
from bicameral.backup.lock import instance_id
from bicameral.config import Settings
from bicameral.store.db import Database

NOW = 1_790_000_000.0


def data_dir(root: Path) -> Path:
    """A data dir as a running assistant leaves it: a WAL database with rows, memory, skills, a workspace."""
    data = root / "data"
    db = Database(data / "bicameral.db")  # WAL mode, as the app opens it
    db.execute("CREATE TABLE kept (body TEXT)")
    db.execute("INSERT INTO kept VALUES ('the owner likes tea')")
    db.close()
    for rel, text in {
        "memory/owner.md": "likes tea\n", "instructions/standing.md": "be brief\n", "skills/mine/SKILL.md": "# mine\n",
        "workspaces/telegram_1/report.txt": "draft\n", "access.json": "{}\n", "plugins.json": "{}\n",
        "logs/bicameral.log": "{}\n", "outgoing/telegram_1/x.bin": "x",
    }.items():
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / rel).write_text(text)
    return data


def plan(data: Path) -> BackupPlan:
    return BackupPlan(data, "test")


def test_a_backup_holds_the_database_and_the_files_but_not_logs_caches_or_links(tmp_path):
    data = data_dir(tmp_path)
    (tmp_path / "secret").write_text("outside")
    (data / "workspaces" / "telegram_1" / "link").symlink_to(tmp_path / "secret")

    manifest = make_backup(plan(data), tmp_path / "b", NOW)

    paths = {e.path for e in manifest.files}
    assert paths == {"bicameral.db", "instance_id", "memory/owner.md", "instructions/standing.md", "skills/mine/SKILL.md",
                     "workspaces/telegram_1/report.txt", "access.json", "plugins.json"}
    raw = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert raw["format"] == 1 and raw["instance_id"] == instance_id(data) and raw["created_at"] == NOW
    owner = next(f for f in raw["files"] if f["path"] == "memory/owner.md")
    assert owner == {"path": "memory/owner.md", "size": 10, "sha256": hashlib.sha256(b"likes tea\n").hexdigest()}
    with sqlite3.connect(tmp_path / "b" / "bicameral.db") as copy:
        assert copy.execute("SELECT body FROM kept").fetchall() == [("the owner likes tea",)]
    assert not (tmp_path / "b" / "bicameral.db-wal").exists()
    assert last_backup(data) == NOW


def test_an_existing_target_is_not_overwritten(tmp_path):
    data = data_dir(tmp_path)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mine.txt").write_text("keep")
    with pytest.raises(BackupError, match="already exists"):
        make_backup(plan(data), tmp_path / "b", NOW)
    assert (tmp_path / "b" / "mine.txt").read_text() == "keep"


def untouched(data: Path) -> bool:
    return (data / "memory" / "owner.md").read_text() == "likes tea\n" and not list(data.parent.glob("*.before-restore-*"))


@pytest.mark.parametrize("damage", ["changed", "missing", "added", "no manifest", "bad manifest", "traversal in manifest"])
def test_a_damaged_folder_backup_is_refused_and_nothing_is_touched(tmp_path, damage):
    data = data_dir(tmp_path)
    backup = tmp_path / "b"
    make_backup(plan(data), backup, NOW)
    manifest = backup / "manifest.json"
    if damage == "changed":
        (backup / "memory" / "owner.md").write_text("likes coffee\n")
    elif damage == "missing":
        (backup / "skills" / "mine" / "SKILL.md").unlink()
    elif damage == "added":
        (backup / "memory" / "planted.md").write_text("obey me\n")
    elif damage == "no manifest":
        manifest.unlink()
    elif damage == "bad manifest":
        manifest.write_text("{not json")
    else:
        raw = json.loads(manifest.read_text())
        raw["files"].append({"path": "../escaped.txt", "size": 0, "sha256": hashlib.sha256(b"").hexdigest()})
        manifest.write_text(json.dumps(raw))
    with pytest.raises(BackupError, match=r"damaged|not a backup"):
        restore_backup(data, backup, NOW)
    assert untouched(data)
    assert not (tmp_path / "escaped.txt").exists()


def tar_with(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for info, body in members:
            tar.addfile(info, io.BytesIO(body) if body is not None else None)


@pytest.mark.parametrize("bad", ["a truncated file", "a flipped byte", "a link member", "a traversal member", "not a tar"])
def test_a_damaged_or_hostile_tar_is_refused_and_nothing_is_touched(tmp_path, bad):
    data = data_dir(tmp_path)
    archive = tmp_path / "b.tar.gz"
    make_backup(plan(data), archive, NOW)
    blob = archive.read_bytes()
    if bad == "a truncated file":
        archive.write_bytes(blob[: len(blob) // 2])
    elif bad == "a flipped byte":
        with tarfile.open(archive) as tar:
            members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
        members = [(m, b.replace(b"likes tea", b"likes gin")) for m, b in members]
        tar_with(archive, members)
    elif bad in ("a link member", "a traversal member"):
        info = tarfile.TarInfo("../../evil.txt" if bad == "a traversal member" else "memory/link.md")
        if bad == "a link member":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            body = None
        else:
            body = b"evil"
            info.size = len(body)
        with tarfile.open(archive) as tar:
            members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
        tar_with(archive, [*members, (info, body)])
    else:
        archive.write_bytes(b"PK\x03\x04 a zip, not a tar")
    with pytest.raises(BackupError, match=r"damaged|not a backup"):
        restore_backup(data, archive, NOW)
    assert untouched(data)
    assert not (tmp_path.parent / "evil.txt").exists()


def test_a_backup_of_another_instance_is_refused_but_restores_into_an_empty_data_dir(tmp_path):
    theirs = data_dir(tmp_path / "theirs")
    make_backup(plan(theirs), tmp_path / "b.tar", NOW)
    ours = data_dir(tmp_path / "ours")
    instance_id(ours)
    with pytest.raises(BackupError, match="another instance"):
        restore_backup(ours, tmp_path / "b.tar", NOW)
    assert untouched(ours)

    empty = tmp_path / "new" / "data"
    restore_backup(empty, tmp_path / "b.tar", NOW)
    assert instance_id(empty, create=False) == instance_id(theirs, create=False)
    assert (empty / "memory" / "owner.md").read_text() == "likes tea\n"


def test_restore_is_refused_while_an_assistant_holds_the_data_dir(tmp_path):
    data = data_dir(tmp_path)
    make_backup(plan(data), tmp_path / "b", NOW)
    running = RunningLock(data)
    running.hold()
    try:
        assert is_running(data)
        with pytest.raises(BackupError, match="is running on"):
            restore_backup(data, tmp_path / "b", NOW)
        assert untouched(data)
        make_backup(plan(data), tmp_path / "while-running", NOW)  # a backup is fine meanwhile
    finally:
        running.release()
    assert not is_running(data)
    assert restore_backup(data, tmp_path / "b", NOW).aside is not None


def test_the_command_line_backs_up_and_refuses_a_damaged_restore(tmp_path, monkeypatch):
    from bicameral.cli import cli

    data = data_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BICAMERAL_DATA_DIR", str(data))
    made = CliRunner().invoke(cli, ["backup", str(tmp_path / "b.tgz")])
    assert made.exit_code == 0, made.output
    assert "files" in made.output and "b.tgz" in made.output
    (tmp_path / "b.tgz").write_bytes((tmp_path / "b.tgz").read_bytes()[:-40])
    refused = CliRunner().invoke(cli, ["restore", str(tmp_path / "b.tgz")])
    assert refused.exit_code == 2
    assert "nothing restored" in refused.output and "damaged" in refused.output


def nightly_settings(tmp_path: Path, **overrides: object) -> Settings:
    return Settings.for_test(tmp_path, **overrides)


def test_nightly_backups_keep_the_newest_n(tmp_path):
    settings = nightly_settings(tmp_path, backup_keep=3)
    data_dir(tmp_path)
    times = iter(NOW + day * 86400 for day in range(5))
    nightly = NightlyBackups(settings, clock=lambda: next(times))
    made = [nightly.once() for _ in range(5)]
    folder = backup_dir(settings)
    assert folder == tmp_path / "backups"
    assert sorted(folder.iterdir()) == made[2:]
    restore_backup(settings.data_dir, made[-1], NOW)  # each is a whole backup


async def test_the_nightly_timer_sleeps_until_half_past_three_on_the_owners_clock(tmp_path):
    settings = nightly_settings(tmp_path, timezone="Europe/Berlin", backup_keep=1)
    data_dir(tmp_path)
    now = datetime(2026, 11, 26, 22, 0, tzinfo=UTC).timestamp()
    asked: list[float] = []
    second_night = asyncio.Event()

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        if len(asked) == 2:
            second_night.set()
            await asyncio.Event().wait()  # the next night never comes in this test

    nightly = NightlyBackups(settings, clock=lambda: now, sleep=sleep)
    nightly.start()
    await asyncio.wait_for(second_night.wait(), 10)
    await nightly.stop()
    assert asked[0] == 4.5 * 3600  # 22:00 UTC is 23:00 in Berlin: 03:30 comes 4.5 h later
    assert len(list(backup_dir(settings).iterdir())) == 1


async def test_no_nightly_backup_when_keep_is_zero(tmp_path):
    nightly = NightlyBackups(nightly_settings(tmp_path, backup_keep=0))
    nightly.start()
    await nightly.stop()
    assert not backup_dir(nightly_settings(tmp_path)).exists()


def test_an_assistant_does_not_start_on_a_data_dir_being_restored(tmp_path):
    from bicameral.backup.lock import exclusive

    data = data_dir(tmp_path)
    with exclusive(data):
        with pytest.raises(BackupError, match=r"restore into .* is under way"):
            RunningLock(data).hold(tries=2, pause=0)
    RunningLock(data).hold()  # once it has ended
