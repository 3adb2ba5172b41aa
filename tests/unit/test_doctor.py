"""`bicameral doctor` checks what exists and says what to fix."""

from __future__ import annotations

import io
from pathlib import Path

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
