"""The assistant's side of a command's child process: started with no environment under CPU and memory limits, asked one
thing in JSON lines, its `fetch` and `files` asks answered, killed at its time limit. No command code runs in the assistant."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bicameral.commands import Fetch, Files
from bicameral.sandbox.bwrap import DROP_TO_SANDBOX_USER, INSIDE_WORKSPACE, SANDBOX_UID, bwrap_options, options_data

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]
MODULE_PREFIX = "bicameral_command_"
CHILD = "bicameral.commands.child"

MEMORY_BYTES = 512 << 20
MAX_LINE = 16 << 20  # a `files` write of the file tools' largest (2 MB), escaped as JSON


class ChildFailed(RuntimeError):
    """The child raised, answered nonsense or died; the message says which (for the log, never for the chat)."""


class ChildTimedOut(ChildFailed):
    pass


def _limits(cpu_seconds: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # it writes no file (bwrap's /proc maps are not files)

    return apply


@dataclass(frozen=True)
class Confinement:
    """bubblewrap for the child: nothing of the host but Python, its packages and bicameral (read-only under /opt) and a
    temporary workspace holding a copy of the command's file; no network, uid 65534."""

    bwrap: str
    folders: tuple[tuple[Path, str], ...]  # (host folder, where inside): the interpreter, its packages, bicameral


async def ask(
    path: Path, request: dict[str, Any], *, timeout: float, fetch: Fetch | None = None, files: Files | None = None,
    spawn: Spawn = asyncio.create_subprocess_exec, confinement: Confinement | None = None,
) -> dict[str, Any]:
    """Start the child for the command file at `path`, send `request`, answer its fetches and file asks; its last
    message."""
    with tempfile.TemporaryDirectory(prefix="bicameral-call-") as empty:
        fds: tuple[int, ...] = ()
        if confinement is None:
            argv, inside = [sys.executable, "-I", "-B", "-m", CHILD], path
        else:
            argv, fds, inside = _confined(confinement, path, Path(empty))
        try:
            proc = await spawn(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                cwd=str(path.parent), env={}, start_new_session=True, preexec_fn=_limits(int(timeout) + 1),
                limit=MAX_LINE, pass_fds=fds,
            )
        finally:
            for fd in fds:
                os.close(fd)
        try:
            return await asyncio.wait_for(_exchange(proc, inside, request, fetch, files), timeout)
        except TimeoutError:
            raise ChildTimedOut(f"still running after {timeout:g} s") from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def _confined(confinement: Confinement, path: Path, empty: Path) -> tuple[list[str], tuple[int, ...], Path]:
    """bwrap's argv (its options through `--args FD`, as the run tool hands them), the fd, and the file's path inside."""
    as_root = os.geteuid() == 0
    shutil.copyfile(path, empty / path.name)  # its own copy: the commands folder (and the data dir) stay out of sight
    if as_root:
        os.chown(empty, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
    options = bwrap_options(empty, as_root=as_root, read_only=confinement.folders)
    options += ["--setenv", "PYTHONPATH", "/opt/site:/opt/src"]
    fd = os.memfd_create("bwrap-args", 0)
    os.write(fd, options_data(options))
    os.lseek(fd, 0, os.SEEK_SET)
    python = f"/opt/python/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    drop = list(DROP_TO_SANDBOX_USER) if as_root else []
    argv = [confinement.bwrap, "--args", str(fd), "--", *drop, python, "-s", "-B", "-m", CHILD]
    return argv, (fd,), Path(INSIDE_WORKSPACE) / path.name


async def _exchange(
    proc: asyncio.subprocess.Process, path: Path, request: dict[str, Any], fetch: Fetch | None, files: Files | None
) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    module = MODULE_PREFIX + path.stem
    first = {**request, "path": str(path), "module": module, "fetch": fetch is not None, "files": files is not None}
    proc.stdin.write((json.dumps(first) + "\n").encode())
    await proc.stdin.drain()
    while True:
        try:
            line = await proc.stdout.readline()
        except ValueError:  # longer than MAX_LINE
            raise ChildFailed("it sent a line too long to read") from None
        if not line:
            raise ChildFailed(f"it ended without an answer (exit code {await proc.wait()})")
        try:
            message = json.loads(line)
        except ValueError:
            raise ChildFailed("it answered something that is not JSON") from None
        if not isinstance(message, dict):
            raise ChildFailed("it answered something that is not an object")
        if "fetch" in message:
            answer = await _fetched(fetch, str(message["fetch"]))
        elif "files" in message:
            answer = await _filed(files, message["files"])
        else:
            return message
        proc.stdin.write((json.dumps(answer) + "\n").encode())
        await proc.stdin.drain()


async def _fetched(fetch: Fetch | None, url: str) -> dict[str, str]:
    if fetch is None:
        return {"error": "this command was not granted network"}
    try:
        return {"text": await fetch(url)}
    except ValueError as exc:
        return {"error": str(exc)}


async def _filed(files: Files | None, asked: Any) -> dict[str, Any]:
    """A `files` ask (read, write or list a path) answered by the chat's workspace, or the sentence refusing it."""
    if files is None:
        return {"error": "this command was not granted files"}
    if not isinstance(asked, dict) or not isinstance(path := asked.get("path"), str):
        return {"error": "a files request names a path"}
    try:
        if asked.get("op") == "read":
            return {"text": await files.read(path)}
        if asked.get("op") == "write" and isinstance(text := asked.get("text"), str):
            await files.write(path, text)
            return {"text": None}
        if asked.get("op") == "list":
            return {"text": await files.list(path)}
    except ValueError as exc:
        return {"error": str(exc)}
    return {"error": "files can read, write or list"}
