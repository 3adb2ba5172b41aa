"""No module grows past 400 lines: past that a newcomer cannot hold it in their head, and it is doing two things."""

from __future__ import annotations

from pathlib import Path

import bicameral

SRC = Path(bicameral.__file__).parent
MAX_LINES = 400


def test_every_module_is_at_most_400_lines():
    long = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these into modules that each do one thing: {long}"
