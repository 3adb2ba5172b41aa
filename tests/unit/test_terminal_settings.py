"""`bicameral chat` answers a typed line after a short wait (a paste still joins one turn), unless told otherwise."""

from __future__ import annotations

from pathlib import Path

from bicameral.cli import TERMINAL_DEBOUNCE_MS, terminal_settings
from bicameral.config import Settings


def test_the_terminal_waits_briefly_for_more_lines(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .env or bicameral.toml of the checkout's
    monkeypatch.delenv("BICAMERAL_DEBOUNCE_MS", raising=False)
    settings = Settings(data_dir=tmp_path)
    assert settings.debounce_ms == 1500  # the chat apps' default, for a message sent in pieces
    assert terminal_settings(settings).debounce_ms == TERMINAL_DEBOUNCE_MS < 500


def test_a_debounce_that_was_set_is_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BICAMERAL_DEBOUNCE_MS", "2000")
    assert terminal_settings(Settings(data_dir=tmp_path)).debounce_ms == 2000
    assert terminal_settings(Settings(data_dir=tmp_path, debounce_ms=0)).debounce_ms == 0
