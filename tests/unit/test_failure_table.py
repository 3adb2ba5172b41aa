"""What a user is told when something fails is written in one place: `failures.py`."""

from __future__ import annotations

import ast
from pathlib import Path

import bicameral
from bicameral.failures import (
    SENTENCES,
    command_failed,
    executor_crash_loop,
    executor_gave_up,
    failure_sentence,
    scheduled_task_failed,
    stopped_task,
    stopped_turn,
    task_failed,
)

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


def test_every_kind_a_caller_names_is_in_the_table() -> None:
    for kind in ("cli_missing", "stalled", "crash", "crash_loop", "shutting_down", "disk_full", "internal"):
        assert failure_sentence(kind) == SENTENCES[kind]
    assert failure_sentence("no such kind") == failure_sentence(None) == SENTENCES["internal"]


def test_the_sentences_with_a_variable_part() -> None:
    assert stopped_turn("3 tool errors in a row") == (
        "I stopped working on this because 3 tool errors in a row. Tell me if you want me to try another way."
    )
    assert stopped_task("it hit the step limit") == "I stopped because it hit the step limit"
    assert task_failed("the report", stopped_task("it hit the step limit")) == (
        "I couldn't finish the report: I stopped because it hit the step limit"
    )
    assert scheduled_task_failed(7, 1, "Oops.") == "Your scheduled task #7 didn't run (I tried once). Oops."
    assert scheduled_task_failed(7, 3, "Oops.").startswith("Your scheduled task #7 didn't run (I tried 3 times).")
    assert command_failed("memory") == "I couldn't do /memory just now (an error on my side). Please try again."
    assert executor_gave_up(SENTENCES["cli_missing"]).endswith(" I'm shutting down until that is fixed.")
    assert executor_crash_loop(SENTENCES["crash_loop"], 10, 10) == (
        "My executor (the Claude Code CLI) keeps crashing.\n\nIt crashed 10 times within 10 minute(s), so I'm "
        "shutting down. The owner needs to look at it and restart me."
    )
