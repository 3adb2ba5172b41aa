"""What a user is told when something fails is written in one place: `failures.py` (the sentences: unit/test_failures.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import bicameral

SRC = Path(bicameral.__file__).parent

# How failure sentences begin or turn: none of these is written out in a string anywhere else in the code.
FAILURE_WORDS = (
    "I stopped",
    "I couldn't",
    "I'm shutting down",
    "didn't run",
    "not installed where",
    "stopped responding",
    "keeps crashing",
    "went wrong on my side",
)


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module (f-strings by their literal parts), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_failure_sentences_are_written_only_in_the_table() -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}: {text[:60]!r}"
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "failures.py"
        for line, text in _strings(path)
        if any(words in text for words in FAILURE_WORDS)
    ]
    assert found == []
