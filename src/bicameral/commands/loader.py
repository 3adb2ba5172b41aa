"""Loads `<data dir>/commands/*.py`: each file checked by the policy, then read by a child process; never imported here."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bicameral.commands import CommandSpec, Param
from bicameral.commands.policy import check_command
from bicameral.commands.process import ChildFailed, ChildTimedOut, Confinement, Spawn, ask

log = logging.getLogger(__name__)

_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}


@dataclass(frozen=True)
class CommandSet:
    """One load of the folder: the commands by name, and each file skipped with why. In-flight calls keep theirs."""

    commands: dict[str, CommandSpec] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def get(self, name: str) -> CommandSpec | None:
        return self.commands.get(name)


def command_files(folder: Path) -> list[Path]:
    """The command modules in the folder: `*.py`, not the tests beside them, not private ones."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith(("test_", "_")) and p.is_file())


async def load_folder(
    folder: Path, *, reserved: frozenset[str], import_timeout: float, spawn: Spawn | None = None,
    confinement: Confinement | None = None,
) -> CommandSet:
    """Every command in `folder` that passes; a broken file is skipped with its reason (which /audit shows)."""
    files = command_files(folder)
    checked = await asyncio.gather(*(_check(path, reserved, import_timeout, spawn, confinement) for path in files))
    commands: dict[str, CommandSpec] = {}
    problems: list[str] = []
    for path, found in zip(files, checked, strict=True):
        if isinstance(found, CommandSpec):
            commands[found.name] = found
            continue
        log.warning("command file %s skipped: %s", path.name, found)
        problems.append(f"command {path.name}: {found}")
    return CommandSet(commands, tuple(problems))


async def _check(
    path: Path, reserved: frozenset[str], import_timeout: float, spawn: Spawn | None, confinement: Confinement | None
) -> CommandSpec | str:
    """What `path` declares, or why it may not be loaded."""
    name = path.stem
    if not name.isidentifier() or not name.islower():
        return "a command's file name must be a lowercase Python identifier"
    if name in reserved:
        return f"/{name} is a built-in command"
    if why := _policy(path):
        return why
    return await describe_file(path, import_timeout, spawn, confinement)


def _policy(path: Path) -> str | None:
    """The file's refusals by the AST policy, in a line; None if it passes."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable: {exc}"
    if refusals := check_command(source, path.name):
        return "; ".join(str(r) for r in refusals)
    return None


async def describe_file(
    path: Path, timeout: float, spawn: Spawn | None = None, confinement: Confinement | None = None
) -> CommandSpec | str:
    """What the file declares, as its child process reads it (no environment, limits, a time limit); or why not."""
    request = {"mode": "describe"}
    try:
        asking = (
            ask(path, request, timeout=timeout, spawn=spawn, confinement=confinement) if spawn
            else ask(path, request, timeout=timeout, confinement=confinement)
        )
        answer = await asking
    except ChildTimedOut:
        return f"importing it did not finish within {timeout:g} s"
    except ChildFailed as exc:
        return f"importing it failed: {exc}"
    if "error" in answer:
        return f"importing it failed: {answer['error']}"
    declared = answer.get("declared")
    names = [d.get("name") for d in declared] if isinstance(declared, list) else []
    if not isinstance(declared, list) or names != [path.stem]:
        return f"it must declare exactly one command, named {path.stem!r} like its file (it declared {names or 'none'})"
    return _spec(declared[0], path)


def _spec(found: dict[str, Any], path: Path) -> CommandSpec:
    """The declaration as the child described it; the handler stays in the child."""
    params = tuple(Param(str(n), _TYPES[str(t)], str(d), bool(r)) for n, t, d, r in found["params"])
    return CommandSpec(
        str(found["name"]), str(found["description"]), params, None, bool(found["takes_context"]),
        tuple(str(c) for c in found["capabilities"]), str(path),
    )
