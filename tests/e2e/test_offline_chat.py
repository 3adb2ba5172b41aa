"""Offline, `bicameral chat` with no API key stores a fact with the memory tool, and after a restart answers a
question about it from the memory tool. The local model's file is made unreadable, so no model helps: anything
it would have had to answer comes back as the "model isn't available" sentence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bicameral.failures import failure_sentence
from tests.e2e.test_process import clean_env

pytestmark = pytest.mark.slow


def _chat(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        BICAMERAL_DATA_DIR=tmp_path / "data",
        BICAMERAL_DEBOUNCE_MS=0,
        BICAMERAL_LOCAL_MODEL_PATH=tmp_path / "no-such-model.gguf",
    )
    return subprocess.run(
        [sys.executable, "-m", "bicameral", "chat"],
        input=text, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90,
    )


def test_a_fact_noted_offline_is_recalled_after_a_restart(tmp_path: Path) -> None:
    first = _chat(tmp_path, "remember that my bike lock code is 2931\n")
    assert first.returncode == 0, first.stderr
    assert "Noted: your bike lock code is 2931" in first.stdout
    assert "Traceback" not in first.stderr

    second = _chat(tmp_path, "what's my bike lock code?\nhow are you?\n")
    assert second.returncode == 0, second.stderr
    assert "From my notes: your bike lock code is 2931" in second.stdout
    # The model was never there: small talk gets the sentence for a missing model.
    assert failure_sentence("unavailable").split(".")[0] in second.stdout  # the terminal renders its Markdown
    assert "Traceback" not in second.stderr
