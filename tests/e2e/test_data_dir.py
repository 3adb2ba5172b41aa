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
