"""`bicameral doctor` says where Chromium is and whether it starts, or why the render tools are off."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from bicameral.browser.chromium import DEFAULT_CHROMIUM, Chromium
from bicameral.config import Settings
from bicameral.doctor import run_checks


async def _chromium_line(settings: Settings) -> str:
    out = io.StringIO()
    await run_checks(settings, Console(file=out, highlight=False, width=300))
    (line,) = [line for line in out.getvalue().splitlines() if "chromium:" in line]
    return line


async def test_doctor_says_why_without_chromium(tmp_path: Path) -> None:
    line = await _chromium_line(Settings.for_test(tmp_path, chromium_path=tmp_path / "no-chromium"))
    assert line.startswith(f"– chromium: render_html and render_latex are off: Chromium is not installed at {tmp_path}")


async def test_doctor_starts_chromium(tmp_path: Path) -> None:
    if why := Chromium().why_off():
        pytest.skip(why)
    line = await _chromium_line(Settings.for_test(tmp_path))
    assert line.startswith(f"✓ chromium: {DEFAULT_CHROMIUM} (")
    assert line.endswith("starts; render_html and render_latex are on")
