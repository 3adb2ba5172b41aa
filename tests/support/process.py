"""Run a program without a shell, bounded in time and output, killed with its group on cancel."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_KILL_GRACE_SECONDS = 0.3


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False


async def run_process(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    max_output: int = 64_000,
) -> ProcessResult:
    """Run argv (no shell); on timeout or cancellation the whole process group is killed at once."""
    if not argv or any("\x00" in part for part in argv):
        raise ValueError("argv must be a non-empty list of strings without NUL bytes")
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own group, so children die with it
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), timeout=timeout)
    except TimeoutError:
        await kill_group(process)
        return ProcessResult(None, "", f"timed out after {timeout:.0f}s", timed_out=True)
    except BaseException:
        await kill_group(process)
        raise
    truncated = len(out) > max_output or len(err) > max_output
    return ProcessResult(
        process.returncode,
        out[:max_output].decode("utf-8", "replace"),
        err[:max_output].decode("utf-8", "replace"),
        truncated=truncated,
    )


async def kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the group, then SIGKILL if it lingers; safe to call on an exited process."""
    if process.returncode is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), _KILL_GRACE_SECONDS)
            return
        except TimeoutError:
            continue
