"""Loading `<data>/commands`: good files load, broken ones are skipped with why, a hang at import is contained; calls
are parsed by the declared types, and a raise or a hang becomes a sentence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bicameral.commands import CommandContext
from bicameral.commands.calls import BadArguments, parse_typed, schema
from bicameral.commands.registry import Commands, CommandsConfig
from tests.commands.support import SHOUT, named

CONTEXT = CommandContext(sender_id="7", sender_name="Ann", chat="telegram:7", channel="telegram", is_owner=False)
TYPED = '''from bicameral.commands import command


@command(name="add", description="Adds", params=[("a", int, "first", True), ("b", float, "second", False),
                                                  ("loud", bool, "shout it", False)])
async def add(a: int, b: float = 0.0, loud: bool = False, context=None) -> str:
    return f"{a + b}{'!' if loud else ''} for {context.sender_name}"
'''


def _commands(folder: Path, **config: float) -> Commands:
    return Commands(CommandsConfig(folder, **config), reserved=lambda: frozenset({"stop", "health"}))


async def test_a_good_file_loads_and_broken_ones_are_skipped_with_why(tmp_path: Path) -> None:
    (tmp_path / "shout.py").write_text(SHOUT)
    (tmp_path / "test_shout.py").write_text("this is a test file, never loaded as a command")
    (tmp_path / "leak.py").write_text("import os\n" + named(SHOUT, "leak"))  # the environment holds the bot token
    (tmp_path / "stop.py").write_text(named(SHOUT, "stop"))  # shadows /stop
    (tmp_path / "boom.py").write_text(named(SHOUT, "boom") + "\nVALUE = 1 / 0\n")
    (tmp_path / "other.py").write_text(named(SHOUT, "notother"))
    loaded = await _commands(tmp_path).reload()
    assert sorted(loaded.commands) == ["shout"]
    problems = "\n".join(loaded.problems)
    assert "leak.py: line 1: importing os is not allowed" in problems
    assert "stop.py: /stop is a built-in command" in problems
    assert "boom.py: importing it failed: ZeroDivisionError: division by zero" in problems
    assert "other.py: it must declare exactly one command, named 'other'" in problems


async def test_a_file_that_hangs_at_import_is_skipped_and_nothing_waits_on_it(tmp_path: Path) -> None:
    """The policy refuses a loop at module level; one hidden in a call there is stopped in the child."""
    hang = "def spin() -> int:\n    while True:\n        pass\n\n\nVALUE = spin()\n"
    (tmp_path / "hang.py").write_text(named(SHOUT, "hang") + "\n" + hang)
    (tmp_path / "shout.py").write_text(SHOUT)
    loaded = await _commands(tmp_path, import_timeout_seconds=1.0).reload()
    assert sorted(loaded.commands) == ["shout"]
    assert loaded.problems == ("command hang.py: importing it did not finish within 1 s",)


async def test_arguments_are_parsed_by_the_declared_types(tmp_path: Path) -> None:
    (tmp_path / "add.py").write_text(TYPED)
    (tmp_path / "shout.py").write_text(SHOUT)
    commands = _commands(tmp_path)
    await commands.reload()
    assert await commands.run_typed("add", "2 0.5 yes", CONTEXT) == "2.5! for Ann"
    assert await commands.run_typed("shout", "hello there 'you'", CONTEXT) == "HELLO THERE YOU!"
    wrong = await commands.run_typed("add", "two", CONTEXT)
    assert wrong.startswith("I can't run that: a must be a integer, not 'two'.\nUsage: /add <a> [b] [loud]")
    assert "missing a" in await commands.run_typed("add", "", CONTEXT)
    assert "too many arguments" in await commands.run_typed("add", "1 2 no 4", CONTEXT)
    with pytest.raises(BadArguments, match="No closing quotation"):
        parse_typed(commands.current.commands["shout"], "'open")
    assert schema(commands.current.commands["add"]) == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "first"}, "b": {"type": "number", "description": "second"},
            "loud": {"type": "boolean", "description": "shout it"},
        },
        "required": ["a"],
        "additionalProperties": False,
    }


async def test_a_command_that_raises_or_hangs_answers_a_sentence_and_the_loop_goes_on(tmp_path: Path) -> None:
    raises = named(SHOUT, "fails").replace('return text.upper() + "!"', "raise RuntimeError(text)")
    spins = named(SHOUT, "spins").replace('return text.upper() + "!"', "while True:\n        pass")
    exits = named(SHOUT, "exits").replace('return text.upper() + "!"', "raise SystemExit(0)")
    for name, source in (("fails", raises), ("spins", spins), ("exits", exits)):
        (tmp_path / f"{name}.py").write_text(source)
    commands = _commands(tmp_path, call_timeout_seconds=0.5)
    await commands.reload()
    assert await commands.run_typed("fails", "secret", CONTEXT) == (
        "I couldn't finish /fails: the command failed (the owner can find why in the log)."
    )
    assert await commands.run_typed("exits", "x", CONTEXT) == (
        "I couldn't finish /exits: the command failed (the owner can find why in the log)."
    ), "a SystemExit in a command never reaches the assistant's loop"
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    assert await commands.run_typed("spins", "x", CONTEXT) == "I stopped /spins: it was still running after 0.5 s."
    ticker.cancel()
    assert ticks > 5, "a handler that never yields holds its own process, not the event loop"


async def test_a_command_that_holds_the_interpreter_or_eats_memory_holds_only_its_child(tmp_path: Path) -> None:
    """A catastrophic regex never releases the GIL, and a huge list would take the host's memory: in the assistant
    either would stall or kill everything; in the command's child one is stopped at the time limit, the other at 512 MiB."""
    greedy = named(SHOUT, "greedy").replace('return text.upper() + "!"', 'return str(re.match("(a+)+$", "a" * 64 + "b"))')
    greedy = greedy.replace("from bicameral", "import re\n\nfrom bicameral")
    hungry = named(SHOUT, "hungry").replace('return text.upper() + "!"', 'return str(len([0] * (10 ** 10)))')
    noisy = named(SHOUT, "noisy").replace('return text.upper() + "!"', 'print("not an answer")\n    return "quiet"')
    for name, source in (("greedy", greedy), ("hungry", hungry), ("noisy", noisy)):
        (tmp_path / f"{name}.py").write_text(source)
    commands = _commands(tmp_path, call_timeout_seconds=1.0)
    assert sorted((await commands.reload()).commands) == ["greedy", "hungry", "noisy"]
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    assert await commands.run_typed("greedy", "x", CONTEXT) == "I stopped /greedy: it was still running after 1 s."
    ticker.cancel()
    assert ticks > 10, "the assistant's loop ran on meanwhile"
    assert await commands.run_typed("hungry", "x", CONTEXT) == (
        "I couldn't finish /hungry: the command failed (the owner can find why in the log)."
    )
    assert await commands.run_typed("noisy", "x", CONTEXT) == "quiet", "what a command prints is not its answer"


async def test_a_reload_swaps_the_set_and_a_call_under_way_keeps_its_own(tmp_path: Path) -> None:
    (tmp_path / "shout.py").write_text(SHOUT)
    commands = _commands(tmp_path)
    before = await commands.reload()
    commands.reload_after_reply()
    (tmp_path / "shout.py").unlink()
    assert commands.current is before, "nothing changes while the turn that asked is still running"
    commands.turn_ended()
    await asyncio.wait_for(commands.reloaded.wait(), 20)
    assert commands.current.commands == {} and "shout" in before.commands


async def test_a_change_no_turn_follows_still_loads_after_the_grace(tmp_path: Path) -> None:
    """In two-chamber mode a back task makes the change: no lane turn may end after it, so a timer reloads."""
    commands = _commands(tmp_path, reload_grace_seconds=0.2)
    await commands.reload()
    (tmp_path / "shout.py").write_text(SHOUT)
    commands.reload_after_reply()
    assert commands.current.get("shout") is None
    await asyncio.wait_for(commands.reloaded.wait(), 20)
    assert commands.current.get("shout") is not None
