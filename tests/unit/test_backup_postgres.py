"""Backups when the database is PostgreSQL (a real server): a pg_dump in the backup, loaded back by restore into an
empty database; every mismatch refused before anything moves; the password never shown."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from bicameral.backup import BackupError, BackupPlan, make_backup, restore_backup
from bicameral.backup.lock import LOCK_NAME
from bicameral.backup.pg_dump import DUMP_NAME
from bicameral.store import Stores
from bicameral.store.memory_scopes import user_scope

NOW = 1_790_000_000.0
ADA = user_scope("telegram:1001")


@pytest.fixture
def empty_url(postgres):
    """A second empty database on the session's server, to restore into."""
    name = postgres.fresh_name()
    url = postgres.create_database(name)
    yield url
    postgres.drop_database(name)


def filled(postgres_url: str, root: Path) -> Path:
    """A data dir whose database is PostgreSQL: a key, a remembered fact, a workspace file."""
    data = root / "data"
    stores = Stores.open(postgres_url, data_dir=data)
    try:
        stores.kv.set("bike", "blue")
        stores.memory.remember(ADA, "Ada's bike is blue")
    finally:
        stores.close()
    (data / "workspaces" / "telegram_1").mkdir(parents=True)
    (data / "workspaces" / "telegram_1" / "notes.txt").write_text("tyre pressure 3 bar\n")
    return data


def test_the_database_is_dumped_into_the_backup_and_restored_into_an_empty_one(postgres_url, empty_url, tmp_path):
    data = filled(postgres_url, tmp_path)
    manifest = make_backup(BackupPlan(data, "test", database_url=postgres_url), tmp_path / "b.tar.gz", NOW)
    paths = {e.path for e in manifest.files}
    assert DUMP_NAME in paths and "bicameral.db" not in paths and "workspaces/telegram_1/notes.txt" in paths
    assert manifest.database == "postgresql"

    fresh = tmp_path / "fresh"
    restored = restore_backup(fresh, tmp_path / "b.tar.gz", NOW, database_url=empty_url)
    assert restored.manifest.database == "postgresql"
    assert not (fresh / DUMP_NAME).exists()  # loaded, then removed: the database holds it now
    assert (fresh / "workspaces" / "telegram_1" / "notes.txt").read_text() == "tyre pressure 3 bar\n"
    again = Stores.open(empty_url, data_dir=fresh)
    try:
        assert again.kv.get("bike") == "blue"
        assert [f.text for f in again.memory.index.search("bikes", [ADA], limit=3)] == ["Ada's bike is blue"]
        again.kv.set("car", "red")  # the identity columns and the schema version came along: it goes on
    finally:
        again.close()


def test_a_folder_backup_lists_the_dump_with_its_checksum(postgres_url, tmp_path):
    data = filled(postgres_url, tmp_path)
    make_backup(BackupPlan(data, "test", database_url=postgres_url), tmp_path / "b", NOW)
    raw = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert raw["database"] == "postgresql"
    dump = next(f for f in raw["files"] if f["path"] == DUMP_NAME)
    assert dump["size"] == (tmp_path / "b" / DUMP_NAME).stat().st_size > 0
    assert (tmp_path / "b" / DUMP_NAME).read_bytes()[:5] == b"PGDMP"  # pg_dump's custom format


def test_a_restore_into_a_database_that_holds_tables_is_refused_before_anything_moves(postgres_url, tmp_path):
    data = filled(postgres_url, tmp_path)
    make_backup(BackupPlan(data, "test", database_url=postgres_url), tmp_path / "b", NOW)
    before = _files(data)
    with pytest.raises(BackupError, match=r"already holds .* tables"):
        restore_backup(data, tmp_path / "b", NOW, database_url=postgres_url)
    assert _files(data) == before


def _files(data: Path) -> dict[str, bytes]:
    """What the data dir holds, but the lock a restore takes."""
    return {p.relative_to(data).as_posix(): p.read_bytes() for p in data.rglob("*") if p.is_file() and p.name != LOCK_NAME}


def test_a_dump_without_a_database_url_and_sqlite_with_one_are_refused(postgres_url, empty_url, tmp_path):
    data = filled(postgres_url, tmp_path)
    make_backup(BackupPlan(data, "test", database_url=postgres_url), tmp_path / "pg", NOW)
    with pytest.raises(BackupError, match="set BICAMERAL_DATABASE_URL"):
        restore_backup(tmp_path / "fresh", tmp_path / "pg", NOW)
    lite = tmp_path / "lite"
    Stores.open(lite / "bicameral.db").close()
    make_backup(BackupPlan(lite, "test"), tmp_path / "sq", NOW)
    with pytest.raises(BackupError, match="holds a SQLite database but BICAMERAL_DATABASE_URL is set"):
        restore_backup(tmp_path / "fresh2", tmp_path / "sq", NOW, database_url=empty_url)
    assert _files(tmp_path / "fresh") == {} and _files(tmp_path / "fresh2") == {}  # nothing moved in


def test_a_failed_dump_makes_no_backup_and_never_shows_the_password(postgres_url, tmp_path):
    data = filled(postgres_url, tmp_path)
    password = postgres_url.split("@", 1)[0].rsplit(":", 1)[1]
    wrong = postgres_url.replace(f":{password}@", ":not-the-password@")
    with pytest.raises(BackupError) as failed:
        make_backup(BackupPlan(data, "test", database_url=wrong), tmp_path / "b", NOW)
    assert "pg_dump exited" in str(failed.value)
    assert password not in str(failed.value) and "not-the-password" not in str(failed.value)
    assert not (tmp_path / "b").exists()


def test_the_command_line_says_the_database_is_in_the_backup(postgres_url, tmp_path, monkeypatch):
    from bicameral.cli import cli

    data = filled(postgres_url, tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BICAMERAL_DATA_DIR", str(data))
    monkeypatch.setenv("BICAMERAL_DATABASE_URL", postgres_url)
    made = CliRunner().invoke(cli, ["backup", str(tmp_path / "b.tgz")])
    assert made.exit_code == 0, made.output
    assert "PostgreSQL database is in it as postgresql.dump" in made.output
    with psycopg.connect(postgres_url) as conn:  # the backup only read it
        assert conn.execute("SELECT value FROM kv WHERE key = 'bike'").fetchone() == ("blue",)
