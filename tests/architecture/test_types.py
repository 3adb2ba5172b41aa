"""All of src/ passes `mypy --strict`, run exactly as pyproject configures it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)  # a cold mypy cache on a busy machine takes a minute or more
def test_src_passes_mypy_strict() -> None:
    pytest.importorskip("mypy")
    # No file arguments: pyproject's [tool.mypy] names what is checked (src/) and how strictly.
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
