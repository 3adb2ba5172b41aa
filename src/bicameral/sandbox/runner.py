"""Runs one command in bubblewrap under resource limits, capping its output and killing the whole tree when done."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bicameral.sandbox.bwrap import SANDBOX_ENV, SANDBOX_UID, SETPRIV, bwrap_options, command_argv, options_data
from bicameral.sandbox.cgroups import CgroupParent, CommandGroup, cgroup_parent
from bicameral.sandbox.disk import DiskLimits, DiskWatch, MiB, Statvfs, mib

log = logging.getLogger(__name__)

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]
FindCgroups = Callable[[], "CgroupParent | str"]


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 60
    memory_bytes: int = 2 << 30  # the whole command's, where cgroups work; else each process's (RLIMIT_AS)
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
    stopped: str | None = None  # why we stopped it (the disk), when we did
    refused: str | None = None  # why it never started
    oom_kills: int = 0  # its processes the kernel killed at the memory bound of its cgroup

    @property
    def failed(self) -> bool:
        return bool(self.timed_out or self.stopped or self.refused or self.oom_kills or self.exit_code != 0)

    def report(self, limits: Limits) -> str:
        """What the model reads: the output, what was cut, and how it ended."""
        if self.refused:
            return f"[not run: {self.refused}]"
        lines = [self.output.rstrip("\n")] if self.output else []
        if self.cut_bytes:
            lines.append(f"[output cut: {self.cut_bytes} bytes from the middle were dropped; redirect to a file to keep all]")
        if self.oom_kills:
            lines.append(
                f"[out of memory: {self.oom_kills} of its processes killed; together they went past "
                f"{mib(limits.memory_bytes)}]"
            )
        if self.stopped:
            lines.append(f"[stopped: {self.stopped}]")
        elif self.timed_out:
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
        disk: DiskLimits | None = None,
        spawn: Spawn = asyncio.create_subprocess_exec,
        cgroups: FindCgroups = cgroup_parent,
        statvfs: Statvfs = os.statvfs,
        read_only: tuple[tuple[Path, str], ...] = (),
    ) -> None:
        self.limits = limits or Limits()
        self.read_only = read_only  # host folders shown read-only under /opt (bwrap.bwrap_options)
        self.disk = disk or DiskLimits()
        self.network = network
        self._bwrap = shutil.which(bwrap or "bwrap") or ""
        self._spawn = spawn
        self._cgroups = cgroups
        self._statvfs = statvfs

    @classmethod
    def configured(cls, bwrap: str, *, quota_mb: int, reserve_mb: int) -> Sandbox:
        """The `run` tool's sandbox: `bwrap` the bubblewrap to run, a workspace's quota and the free space kept, in MiB."""
        return cls(bwrap=bwrap, disk=DiskLimits(quota_bytes=quota_mb * MiB, reserve_bytes=reserve_mb * MiB))

    def bounds(self) -> str:
        """The limits that hold here, in a line: for doctor."""
        limits, found = self.limits, self._cgroups()
        memory, processes = mib(limits.memory_bytes), limits.processes
        if isinstance(found, CgroupParent):
            tree = f"memory {memory} and {processes} processes for a command's whole tree ({found.describe()})"
        else:
            tree = f"memory {memory} per process only, {processes} processes per user (no cgroup: {found})"
        return (
            f"{tree}; {limits.cpu_seconds} s CPU, {mib(limits.file_bytes)} a file, {limits.wall_seconds:.0f} s; "
            f"workspace quota {mib(self.disk.quota_bytes)}, {mib(self.disk.reserve_bytes)} kept free"
        )

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
                result = await self._run(Path(probe), "true", watch=None)
            except OSError as exc:
                return f"bubblewrap could not start: {exc}"
        if result.exit_code != 0:
            detail = result.output.strip().splitlines()[-1:] or ["no output"]
            return f"bubblewrap cannot create its sandbox here (user namespaces off?): {detail[0]}"
        return None

    async def run(self, workspace: Path, command: str) -> RunResult:
        """Run `command` with `sh -c` inside the sandbox; kills the whole tree on timeout, cancellation, or when
        the workspace or the disk runs out of room."""
        watch = DiskWatch(workspace, self.disk, statvfs=self._statvfs)
        if why := await watch.start():
            return RunResult(exit_code=None, output="", refused=why)
        return await self._run(workspace, command, watch=watch)

    async def _run(self, workspace: Path, command: str, *, watch: DiskWatch | None) -> RunResult:
        limits = self.limits
        as_root = os.geteuid() == 0
        group = self._command_group()
        options = bwrap_options(workspace, as_root=as_root, network=self.network, tmp_bytes=limits.memory_bytes,
                                read_only=self.read_only)
        args_fd = _args_file(options_data(options))
        try:
            proc = await self._spawn(
                self._bwrap,
                "--args",
                str(args_fd),
                *command_argv(command, as_root=as_root),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=dict(SANDBOX_ENV),
                start_new_session=True,
                pass_fds=(args_fd,),
                preexec_fn=_prepare(limits, group),
            )
        except BaseException:
            if group is not None:
                await _remove(group)
            raise
        finally:
            os.close(args_fd)
        capture = _Capture(limits.output_bytes)
        timed_out = False
        stopped: list[str] = []
        watcher = asyncio.create_task(self._watch(watch, proc, group, stopped)) if watch is not None else None
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
            if watcher is not None:
                watcher.cancel()
            _kill_tree(proc, group)
            with contextlib.suppress(ProcessLookupError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=10)
            oom_kills = group.oom_kills() if group is not None else 0
            if group is not None:
                await _remove(group)
        return RunResult(
            exit_code=code, output=capture.text(), cut_bytes=capture.cut, timed_out=timed_out and not stopped,
            stopped=stopped[0] if stopped else None, oom_kills=oom_kills,
        )

    def _command_group(self) -> CommandGroup | None:
        """A cgroup of the command's own, or None where there are none (the per-process limits still hold)."""
        found = self._cgroups()
        if not isinstance(found, CgroupParent):
            return None
        try:
            return found.create(self.limits.memory_bytes, self.limits.processes)
        except OSError as exc:
            log.warning("sandbox: no cgroup for this command (%s); its limits are per process", exc)
            return None

    async def _watch(self, watch: DiskWatch, proc: Any, group: CommandGroup | None, stopped: list[str]) -> None:
        """Poll the disk while the command runs; past the quota or into the reserve, kill it and say why."""
        while proc.returncode is None:
            await asyncio.sleep(self.disk.poll_seconds)
            if why := await watch.check():
                stopped.append(why)
                _kill_tree(proc, group)
                return


def _args_file(data: bytes) -> int:
    """An anonymous file holding bwrap's options; bwrap reads it and closes it before the command starts."""
    fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _prepare(limits: Limits, group: CommandGroup | None) -> Callable[[], None]:
    """Runs in the child before it becomes bwrap: into the command's cgroup, then the per-process limits."""

    def apply() -> None:
        if group is not None:
            group.join()
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _kill_tree(proc: Any, group: CommandGroup | None) -> None:
    if group is not None:
        group.kill()
    if proc.returncode is not None:
        return
    # bwrap is the group leader; killing it takes down its pid namespace (--die-with-parent, pid 1 gone).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _remove(group: CommandGroup) -> None:
    """Delete the command's cgroup once its last process has gone (killed processes take a moment to exit)."""
    for delay in (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
        await asyncio.sleep(delay)
        if group.remove():
            return
        group.kill()
    log.warning("sandbox: the cgroup %s still holds processes; it is removed at the next start", group.dirs[0].name)


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
