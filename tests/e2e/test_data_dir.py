"""An unusable data dir at start exits 2 with one line saying what to fix, never a traceback."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_process import bot_env, chat_env, run_cli

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """Make a directory unwritable even for root (tests run as root, so chmod alone would not do)."""
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("cannot make a directory read-only here (no chattr, or the filesystem refuses +i)")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


def assert_one_clear_line(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("bicameral: ")
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_data_dir_that_is_a_file_exits_2_saying_so(tmp_path, telegram, models, command):
    not_a_dir = tmp_path / "data-file"
    not_a_dir.write_text("I am a file")
    env = bot_env(tmp_path, telegram, models) if command == "run" else chat_env(tmp_path, models)
    env["BICAMERAL_DATA_DIR"] = str(not_a_dir)
    result = run_cli(tmp_path, env, command, timeout=30)
    assert_one_clear_line(result, str(not_a_dir), "BICAMERAL_DATA_DIR", "not a directory")


@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_read_only_data_dir_exits_2_saying_so(tmp_path, telegram, models, command):
    data = tmp_path / "data"
    data.mkdir()
    env = bot_env(tmp_path, telegram, models) if command == "run" else chat_env(tmp_path, models)
    with immutable(data):
        result = run_cli(tmp_path, env, command, timeout=30)
    assert_one_clear_line(result, str(data), "BICAMERAL_DATA_DIR", "writable")


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_database_migrated_by_a_newer_version_stops_this_one_with_exit_2(tmp_path, telegram, models, engine, request):
    """Two workers of different versions on one database: the newer migrated it, the older stops and says why."""
    import sqlite3

    from bicameral.store import open_database
    from bicameral.store.db import known_version

    newer = known_version() + 1
    if engine == "postgresql":
        url = request.getfixturevalue("postgres_url")
        open_database(url).close()  # migrated to this version
        db = open_database(url)
        db.execute("UPDATE schema_version SET version = ?", (newer,))  # as a newer worker's migration leaves it
        db.close()
        env = bot_env(tmp_path, telegram, models, BICAMERAL_DATABASE_URL=url)
    else:
        path = tmp_path / "data" / "bicameral.db"
        open_database(path).close()
        conn = sqlite3.connect(path)
        conn.execute(f"PRAGMA user_version={newer}")
        conn.close()
        env = bot_env(tmp_path, telegram, models)
    before = len(telegram.calls_to("getUpdates"))
    result = run_cli(tmp_path, env, "run")
    assert result.returncode == 2 and "Traceback" not in result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("bicameral: ")]
    assert len(said) == 1 and f"schema is version {newer}" in said[0] and "upgrade this one too" in said[0]
    assert len(telegram.calls_to("getUpdates")) == before  # it never started serving
