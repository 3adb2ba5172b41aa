"""The assistant's side of a command's child process: started with no environment under CPU and memory limits, asked one
thing in JSON lines, a `fetch` it asks for answered, killed at its time limit. No command code runs in the assistant."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bicameral.commands import Fetch

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]
MODULE_PREFIX = "bicameral_command_"
MEMORY_BYTES = 512 << 20
MAX_LINE = 1 << 20


class ChildFailed(RuntimeError):
    """The child raised, answered nonsense or died; the message says which (for the log, never for the chat)."""


class ChildTimedOut(ChildFailed):
    pass


def _limits(cpu_seconds: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # it writes no file

    return apply


async def ask(
    path: Path, request: dict[str, Any], *, timeout: float, fetch: Fetch | None = None,
    spawn: Spawn = asyncio.create_subprocess_exec,
) -> dict[str, Any]:
    """Start the child for the command file at `path`, send `request`, answer its fetches; its last message."""
    proc = await spawn(
        sys.executable, "-I", "-B", "-m", "bicameral.commands.child", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=str(path.parent), env={},
        start_new_session=True, preexec_fn=_limits(int(timeout) + 1), limit=MAX_LINE,
    )
    try:
        return await asyncio.wait_for(_exchange(proc, path, request, fetch), timeout)
    except TimeoutError:
        raise ChildTimedOut(f"still running after {timeout:g} s") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _exchange(proc: asyncio.subprocess.Process, path: Path, request: dict[str, Any], fetch: Fetch | None) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    first = {**request, "path": str(path), "module": MODULE_PREFIX + path.stem, "fetch": fetch is not None}
    proc.stdin.write((json.dumps(first) + "\n").encode())
    await proc.stdin.drain()
    while True:
        line = await proc.stdout.readline()
        if not line:
            raise ChildFailed(f"it ended without an answer (exit code {await proc.wait()})")
        try:
            message = json.loads(line)
        except ValueError:
            raise ChildFailed("it answered something that is not JSON") from None
        if not isinstance(message, dict):
            raise ChildFailed("it answered something that is not an object")
        if "fetch" not in message:
            return message
        proc.stdin.write((json.dumps(await _fetched(fetch, str(message["fetch"]))) + "\n").encode())
        await proc.stdin.drain()


async def _fetched(fetch: Fetch | None, url: str) -> dict[str, str]:
    if fetch is None:
        return {"error": "this command was not granted network"}
    try:
        return {"text": await fetch(url)}
    except ValueError as exc:
        return {"error": str(exc)}
