"""`bicameral doctor` checks what exists and says what to fix."""

from __future__ import annotations

import io
from pathlib import Path

import psycopg
from rich.console import Console

from bicameral.config import Settings
from bicameral.doctor import run_checks
from tests.fakes.model_server import ModelServer


async def _doctor(settings: Settings) -> tuple[bool, list[str]]:
    out = io.StringIO()
    ok = await run_checks(settings, Console(file=out, highlight=False, width=300))
    return ok, out.getvalue().splitlines()


async def test_doctor_checks_only_features_that_exist(tmp_path: Path) -> None:
    with ModelServer() as models:
        settings = Settings.for_test(tmp_path, openai_base_url=models.openai_url, openai_api_key="k")
        ok, lines = await _doctor(settings)
    names = [line.split(":", 1)[0][2:] for line in lines[:-1]]
    assert names == [
        "data dir", "database", "access", "telegram", "matrix", "back model", "claude", "sandbox", "chromium", "documents",
        "voice", "plugins",
    ]
    assert ok and lines[-1] == "all required checks passed"


async def test_an_unusable_back_model_is_reported_with_what_to_fix(tmp_path: Path) -> None:
    settings = Settings.for_test(tmp_path, back_model="anthropic:claude-test")
    ok, lines = await _doctor(settings)
    (line,) = [line for line in lines if line.startswith("✗ back model")]
    assert "ANTHROPIC_API_KEY is not set" in line and not ok


async def test_doctor_says_why_the_run_tool_is_off_without_bubblewrap(tmp_path: Path) -> None:
    with ModelServer() as models:
        settings = Settings.for_test(
            tmp_path, openai_base_url=models.openai_url, openai_api_key="k", sandbox_bwrap=str(tmp_path / "no-bwrap")
        )
        ok, lines = await _doctor(settings)
    (line,) = [line for line in lines if "sandbox:" in line]
    assert line.startswith("– sandbox: the run tool is off: bubblewrap (bwrap) is not installed: run scripts/setup")
    assert ok  # the rest still works: the sandbox is not required


async def test_with_postgresql_the_database_check_reads_that_server_and_never_migrates_it(tmp_path: Path,
                                                                                          postgres_url: str) -> None:
    from bicameral.store import open_database
    from bicameral.store.db import known_version

    settings = Settings.for_test(tmp_path, database_url=postgres_url)
    ok, lines = await _doctor(settings)
    (line,) = [line for line in lines if " database:" in line]
    assert line.startswith("✓ database:") and "(PostgreSQL) at schema version 0" in line
    assert f"the next start migrates it to {known_version()}" in line
    assert not (tmp_path / "data" / "bicameral.db").exists() and not settings.db_path.exists()  # no SQLite made
    password = postgres_url.split(":")[2].split("@")[0]
    assert password not in "\n".join(lines)
    with psycopg.connect(postgres_url) as conn:  # read only: not a table made
        assert conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
    db = open_database(postgres_url)  # a worker of a newer bicameral migrated it
    try:
        db.execute("UPDATE schema_version SET version = ?", (known_version() + 1,))
    finally:
        db.close()
    ok, lines = await _doctor(settings)
    (line,) = [line for line in lines if " database:" in line]
    assert line.startswith("✗ database:") and f"newer than this bicameral knows ({known_version()})" in line
    assert not ok


async def test_with_a_wrong_postgresql_password_the_database_check_fails_without_showing_it(tmp_path: Path,
                                                                                            postgres_url: str) -> None:
    wrong = postgres_url.replace(postgres_url.split(":")[2].split("@")[0], "not-the-password-123")
    ok, lines = await _doctor(Settings.for_test(tmp_path, database_url=wrong))
    (line,) = [line for line in lines if " database:" in line]
    assert line.startswith("✗ database:") and "not-the-password-123" not in "\n".join(lines)
    assert not ok
