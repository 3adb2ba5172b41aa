"""Loads `<data dir>/commands/*.py`: each file checked by the policy, imported first in a child with a time limit, then here."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import bicameral.commands as declaring
from bicameral.commands import CommandSpec
from bicameral.commands.policy import check_command

log = logging.getLogger(__name__)

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]
MODULE_PREFIX = "bicameral_command_"
# Run by the child: import the file as its module, say what it declared. A file that hangs here hangs only the child.
_PROBE = (
    "import importlib.util, sys, bicameral.commands as c\n"
    "spec = importlib.util.spec_from_file_location(sys.argv[2], sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "print(' '.join(s.name for s in c.declared))\n"
)


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
    folder: Path, *, reserved: frozenset[str], import_timeout: float, spawn: Spawn = asyncio.create_subprocess_exec
) -> CommandSet:
    """Every command in `folder` that passes; a broken file is skipped with its reason (which /audit shows)."""
    files = command_files(folder)
    checked = await asyncio.gather(*(_check(path, reserved, import_timeout, spawn) for path in files))
    commands: dict[str, CommandSpec] = {}
    problems: list[str] = []
    for path, why in zip(files, checked, strict=True):
        if why is None:
            try:
                spec = load_file(path)
            except (Exception, SystemExit, KeyboardInterrupt) as exc:  # a file edited by hand may fail any way at all
                why = f"{type(exc).__name__}: {exc}"
            else:
                commands[spec.name] = spec
                continue
        log.warning("command file %s skipped: %s", path.name, why)
        problems.append(f"command {path.name}: {why}")
    return CommandSet(commands, tuple(problems))


async def _check(path: Path, reserved: frozenset[str], import_timeout: float, spawn: Spawn) -> str | None:
    """Why `path` may not be loaded, or None."""
    name = path.stem
    if not name.isidentifier() or not name.islower():
        return "a command's file name must be a lowercase Python identifier"
    if name in reserved:
        return f"/{name} is a built-in command"
    if why := _policy(path):
        return why
    return await probe_import(path, import_timeout, spawn)


def _policy(path: Path) -> str | None:
    """The file's refusals by the AST policy, in a line; None if it passes."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable: {exc}"
    if refusals := check_command(source, path.name):
        return "; ".join(str(r) for r in refusals)
    return None


async def probe_import(path: Path, timeout: float, spawn: Spawn = asyncio.create_subprocess_exec) -> str | None:
    """Import the file in a child process first (no environment, so no secrets): None if it declared just its own
    command in time, else why not."""
    proc = await spawn(
        sys.executable, "-I", "-c", _PROBE, str(path), MODULE_PREFIX + path.stem,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=str(path.parent), env={}, start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return f"importing it did not finish within {timeout:.0f} s"
    if proc.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        return f"importing it failed: {lines[-1] if lines else f'exit code {proc.returncode}'}"
    names = out.decode(errors="replace").split()
    if names != [path.stem]:
        return f"it must declare exactly one command, named {path.stem!r} like its file (it declared {names or 'none'})"
    return None


def load_file(path: Path) -> CommandSpec:
    """Import the file here as a fresh module (a reload is a new module, never one changed under a running call)."""
    module_name = MODULE_PREFIX + path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    declaring.declared.clear()
    try:
        spec.loader.exec_module(module)
        found = list(declaring.declared)
    finally:
        declaring.declared.clear()
    if [s.name for s in found] != [path.stem]:
        raise ValueError(f"it must declare exactly one command, named {path.stem!r} like its file")
    return found[0]
