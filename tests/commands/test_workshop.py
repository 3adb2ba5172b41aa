"""Creating, refusing, removing and rolling back commands: the tests run in the real sandbox, the changes in real git."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from bicameral.commands import CommandContext
from bicameral.commands.registry import Commands, CommandsConfig
from bicameral.commands.trial import trial_sandbox
from bicameral.commands.workshop import Refused, Workshop
from tests.commands.support import SHOUT, SHOUT_TESTS, WHISPER_SHOUT, WHISPER_TESTS, named, needs_bwrap

CONTEXT = CommandContext(sender_id="1", sender_name="Owner", chat="telegram:1", channel="telegram", is_owner=True)


def _workshop(folder: Path, test_seconds: float = 60) -> Workshop:
    commands = Commands(
        CommandsConfig(folder, test_timeout_seconds=test_seconds), reserved=lambda: frozenset({"stop", "health", "help"})
    )
    sandbox = trial_sandbox("bwrap", wall_seconds=test_seconds)
    assert not isinstance(sandbox, str), sandbox
    return Workshop(commands, sandbox)


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


async def _after_reply(commands: Commands) -> None:
    commands.turn_ended()
    await asyncio.wait_for(commands.reloaded.wait(), 30)


@needs_bwrap
async def test_a_command_is_tested_in_the_sandbox_committed_and_loaded_after_the_reply(tmp_path: Path) -> None:
    folder = tmp_path / "commands"
    workshop = _workshop(folder)
    done = await workshop.create("shout", "Shout it", SHOUT, SHOUT_TESTS, "add a command that shouts", replace=False)
    assert done.text.startswith("/shout passed its tests in the sandbox (1 passed")
    assert workshop.commands.current.get("shout") is None, "not before the reply has gone out"
    await _after_reply(workshop.commands)
    assert await workshop.commands.run_typed("shout", "hi", CONTEXT) == "HI!"
    assert _git(folder, "log", "--format=%an <%ae> %s") == "bicameral <bicameral@localhost> add a command that shouts\n"
    assert sorted(_git(folder, "ls-files").split()) == ["shout.py", "test_shout.py"]


@needs_bwrap
@pytest.mark.parametrize(
    ("name", "code", "tests", "why"),
    [
        ("stop", named(SHOUT, "stop"), named(SHOUT_TESTS, "stop"), "/stop is a built-in command"),
        ("health", named(SHOUT, "health"), named(SHOUT_TESTS, "health"), "/health is a built-in command"),
        ("Shout", SHOUT, SHOUT_TESTS, "is not a command name"),
        ("yell", SHOUT, named(SHOUT_TESTS, "yell"), 'yell.py must declare @command(name="yell"'),
        ("shout", "import subprocess as s\n" + SHOUT, SHOUT_TESTS, "shout.py line 1: importing subprocess"),
        ("shout", SHOUT, "import pytest\n\n\ndef test_nothing():\n    assert True\n", "must import the command module"),
        ("shout", SHOUT, "from shout import shout\n", "no tests were collected"),
        ("shout", SHOUT, SHOUT_TESTS.replace('"HI!"', '"nope"'), "its tests did not pass in the sandbox"),
        ("shout", SHOUT, SHOUT_TESTS + "\n\ndef test_spin():\n    while True:\n        pass\n", "[killed: still running"),
    ],
)
async def test_a_refused_command_is_never_saved_nor_run(tmp_path: Path, name: str, code: str, tests: str, why: str) -> None:
    folder = tmp_path / "commands"
    workshop = _workshop(folder, test_seconds=5)
    with pytest.raises(Refused) as refused:
        await workshop.create(name, "x", code, tests, "", replace=False)
    assert why in str(refused.value)
    assert not (folder / f"{name}.py").exists() and not (folder / ".git").exists()
    await workshop.commands.reload()
    assert workshop.commands.current.commands == {}


@needs_bwrap
async def test_the_sandbox_keeps_the_tests_away_from_the_real_folder_and_the_network(tmp_path: Path) -> None:
    """Past the policy (a test the owner might write by hand), the run still sees a copy, no network, no data dir."""
    folder = tmp_path / "commands"
    workshop = _workshop(folder)
    await workshop.create("shout", "Shout it", SHOUT, SHOUT_TESTS, "add shout", replace=False)
    assert workshop.sandbox is not None and not isinstance(workshop.sandbox, str)
    from bicameral.commands.trial import run_tests

    probe = (
        "import os, socket\nfrom shout import shout\n\n\ndef test_escape():\n    os.remove('shout.py')\n"
        f"    assert not os.path.exists({str(folder)!r})\n"
        "    try:\n        socket.create_connection(('1.1.1.1', 53), timeout=2)\n    except OSError:\n        return\n"
        "    raise AssertionError('network reachable')\n"
    )
    result = await run_tests(workshop.sandbox, folder, "shout", SHOUT, probe)
    assert result.passed, result.report
    assert (folder / "shout.py").read_text() == SHOUT, "the test deleted its copy, never the command"


@needs_bwrap
async def test_rollback_to_an_earlier_version_and_removal_go_through_git(tmp_path: Path) -> None:
    folder = tmp_path / "commands"
    workshop = _workshop(folder)
    await workshop.create("shout", "Shout it", SHOUT, SHOUT_TESTS, "add shout", replace=False)
    first = _git(folder, "rev-parse", "--short", "HEAD").strip()
    with pytest.raises(Refused, match="exists already"):
        await workshop.create("shout", "Shout it", WHISPER_SHOUT, WHISPER_TESTS, "", replace=False)
    await workshop.create("shout", "Shout it", WHISPER_SHOUT, WHISPER_TESTS, "make shout whisper", replace=True)
    await _after_reply(workshop.commands)
    assert await workshop.commands.run_typed("shout", "HI", CONTEXT) == "hi..."
    done = await workshop.rollback("shout", first, "roll back shout to the first version")
    assert done.text.startswith(f"/shout is back to its version of {first}")
    await _after_reply(workshop.commands)
    assert await workshop.commands.run_typed("shout", "hi", CONTEXT) == "HI!"
    tomorrow = await workshop.rollback("shout", "tomorrow", "")  # a date: the last version before it
    assert "is back to its version of" in tomorrow.text
    await workshop.remove("shout", "remove shout")
    await _after_reply(workshop.commands)
    assert workshop.commands.current.get("shout") is None
    log = await workshop.history.log("shout")
    # The rollback to the version it already had changed no file, so the command's history does not show it.
    assert [line.split(" ", 3)[3] for line in log.splitlines()] == [
        "remove shout", "roll back shout to the first version", "make shout whisper", "add shout",
    ]
    with pytest.raises(Refused, match="there is no command /shout"):
        await workshop.remove("shout", "")
    with pytest.raises(Refused, match="no version of shout from before"):
        await workshop.rollback("shout", "2000-01-01", "")


@needs_bwrap
async def test_a_change_that_cannot_be_loaded_leaves_the_version_in_use(tmp_path: Path) -> None:
    """Its tests pass (60 s), but importing it takes longer than a load allows (here 1 s): refused, the old one kept."""
    folder = tmp_path / "commands"
    workshop = _workshop(folder)
    await workshop.create("shout", "Shout it", SHOUT, SHOUT_TESTS, "add shout", replace=False)
    slow = (
        "\n\ndef spin() -> int:\n    total = 0\n    for i in range(30_000_000):\n        total += i\n"
        "    return total\n\n\nX = spin()\n"
    )
    commands = Commands(
        CommandsConfig(folder, import_timeout_seconds=1.0), reserved=lambda: frozenset({"stop", "health", "help"})
    )
    sandbox = trial_sandbox("bwrap", wall_seconds=60)
    assert not isinstance(sandbox, str)
    impatient = Workshop(commands, sandbox)
    with pytest.raises(Refused, match="it cannot be loaded, so nothing was saved: importing it did not finish within 1 s"):
        await impatient.create("shout", "Shout it", WHISPER_SHOUT + slow, WHISPER_TESTS, "", replace=True)
    assert (folder / "shout.py").read_text() == SHOUT and (folder / "test_shout.py").read_text() == SHOUT_TESTS
    assert _git(folder, "status", "--porcelain") == ""
