"""docs/architecture.md names every module in one line: a module added without its row fails here."""

from __future__ import annotations

import re
from pathlib import Path

import bicameral

SRC = Path(bicameral.__file__).parent
DOC = SRC.parents[1] / "docs" / "architecture.md"


def _documented() -> set[str]:
    return set(re.findall(r"^\| `([^`]+)` \|", DOC.read_text(encoding="utf-8"), flags=re.M))


def test_every_module_has_a_row() -> None:
    documented = _documented()
    modules = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name != "__init__.py" and path.parent.name != "prompts"
    }
    missing = sorted(m for m in modules if m not in documented and f"{Path(m).parent}/" not in documented)
    assert missing == [], f"add a one-line row to docs/architecture.md for: {missing}"


def test_no_row_names_a_module_that_is_gone() -> None:
    gone = sorted(row for row in _documented() if not (SRC / row.rstrip("/")).exists())
    assert gone == [], f"docs/architecture.md describes modules that no longer exist: {gone}"
