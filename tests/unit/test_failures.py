"""The failure sentences of `failures.py`: one per kind, and those with a variable part."""

from __future__ import annotations

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
