"""Runs one command in bubblewrap under resource limits, capping its output and killing the whole tree when done."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bicameral.sandbox.bwrap import SANDBOX_ENV, SANDBOX_UID, SETPRIV, bwrap_argv

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 60
    memory_bytes: int = 2 << 30
    processes: int = 256
    file_bytes: int = 200 << 20
    wall_seconds: float = 100.0  # under the registry's 120 s tool timeout, so the model reads why it stopped
    output_bytes: int = 16_000


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None
    output: str
    cut_bytes: int = 0
    timed_out: bool = False

    def report(self, limits: Limits) -> str:
        """What the model reads: the output, what was cut, and how it ended."""
        lines = [self.output.rstrip("\n")] if self.output else []
        if self.cut_bytes:
            lines.append(f"[output cut: {self.cut_bytes} bytes from the middle were dropped; redirect to a file to keep all]")
        if self.timed_out:
            lines.append(f"[killed: still running after {limits.wall_seconds:.0f}s]")
        elif self.exit_code is not None and self.exit_code < 0:
            lines.append(f"[killed by signal {-self.exit_code}: a CPU, memory, process or file size limit, or a crash]")
        else:
            lines.append(f"[exit code {self.exit_code}]")
        return "\n".join(lines)


class Sandbox:
    """Runs shell commands confined to a workspace; `unavailable()` says why it cannot run here, if it cannot."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        network: bool = False,
        bwrap: str | None = None,
        spawn: Spawn = asyncio.create_subprocess_exec,
    ) -> None:
        self.limits = limits or Limits()
        self.network = network
        self._bwrap = shutil.which(bwrap or "bwrap") or ""
        self._spawn = spawn

    async def unavailable(self) -> str | None:
        """None when a sandboxed `true` runs; otherwise the reason, for doctor and the run tool."""
        if not self._bwrap:
            return "bubblewrap (bwrap) is not installed: run scripts/setup or `apt-get install bubblewrap`"
        if os.geteuid() == 0 and not os.access(SETPRIV, os.X_OK):
            return f"{SETPRIV} is missing (util-linux); started as root the sandbox needs it to leave root"
        # A fresh empty directory of its own: the only kind, besides a workspace, handed to the sandbox user.
        with tempfile.TemporaryDirectory(prefix="bicameral-probe-") as probe:
            if os.geteuid() == 0:
                os.chown(probe, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
            try:
                result = await self.run(Path(probe), "true")
            except OSError as exc:
                return f"bubblewrap could not start: {exc}"
        if result.exit_code != 0:
            detail = result.output.strip().splitlines()[-1:] or ["no output"]
            return f"bubblewrap cannot create its sandbox here (user namespaces off?): {detail[0]}"
        return None

    async def run(self, workspace: Path, command: str) -> RunResult:
        """Run `command` with `sh -c` inside the sandbox; kills the whole tree on timeout or cancellation."""
        limits = self.limits
        as_root = os.geteuid() == 0
        argv = bwrap_argv(self._bwrap, workspace, command, as_root=as_root, network=self.network)
        proc = await self._spawn(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(SANDBOX_ENV),
            start_new_session=True,
            preexec_fn=_limiter(limits),
        )
        capture = _Capture(limits.output_bytes)
        timed_out = False
        deadline = asyncio.get_running_loop().time() + limits.wall_seconds
        try:
            assert proc.stdout is not None
            await asyncio.wait_for(capture.drain(proc.stdout), timeout=limits.wall_seconds)
            left = deadline - asyncio.get_running_loop().time()
            code = await asyncio.wait_for(proc.wait(), timeout=max(1.0, left))
        except TimeoutError:
            timed_out = True
            code = None
        finally:
            # bwrap is the group leader; killing it takes down its pid namespace (--die-with-parent, pid 1 gone).
            _kill_tree(proc)
            with contextlib.suppress(ProcessLookupError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=10)
        return RunResult(exit_code=code, output=capture.text(), cut_bytes=capture.cut, timed_out=timed_out)


def _limiter(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _kill_tree(proc: Any) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _Capture:
    """Keeps the first and last halves of a stream up to a budget and counts what fell between."""

    def __init__(self, budget: int) -> None:
        self._half = budget // 2
        self._head = bytearray()
        self._tail = bytearray()
        self.cut = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self._half - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                chunk = chunk[room:]
            self._tail += chunk
            if len(self._tail) > self._half:
                self.cut += len(self._tail) - self._half
                del self._tail[: len(self._tail) - self._half]

    def text(self) -> str:
        middle = "\n[...]\n" if self.cut else ""
        return self._head.decode("utf-8", "replace") + middle + self._tail.decode("utf-8", "replace")
