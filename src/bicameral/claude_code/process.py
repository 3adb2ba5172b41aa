"""One running `claude` process: spawn, the stdout and stderr readers, one `send` for stdin, the exit watch, kill."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bicameral.claude_code.capture import WireCapture
from bicameral.claude_code.spec import SpawnSpec
from bicameral.claude_code.stream import StreamEvent, parse_line

log = logging.getLogger(__name__)
cc = logging.getLogger("bicameral.cc")

Spawn = Callable[[SpawnSpec], Awaitable[asyncio.subprocess.Process]]
OnEvent = Callable[["CliProcess", StreamEvent], Awaitable[None]]
OnExit = Callable[["CliProcess", "Exited"], None]

# A line of stream-json can carry a whole image (the replay of a photo we sent): allow big lines.
_LINE_LIMIT = 64 * 1024 * 1024
_STDERR_TAIL = 40
_STOP_GRACE = 3.0


@dataclass(frozen=True)
class Exited:
    """The process ended: with which code, why, and whether we ended it on purpose."""

    pid: int
    code: int | None
    reason: str
    expected: bool


async def spawn_process(spec: SpawnSpec) -> asyncio.subprocess.Process:
    """Start the CLI in its own process group, so a Ctrl-C aimed at us does not kill it behind our back."""
    return await asyncio.create_subprocess_exec(
        *spec.argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(spec.cwd),
        env=dict(spec.env),
        limit=_LINE_LIMIT,
        start_new_session=True,
    )


async def cli_version(binary: str, env: Mapping[str, str], timeout: float = 20.0) -> str | None:
    """What `claude --version` prints, or None if it does not run."""
    try:
        proc = await asyncio.create_subprocess_exec(
            binary, "--version",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=dict(env),
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None
    return out.decode("utf-8", errors="replace").strip() if proc.returncode == 0 else None


class CliProcess:
    """A started CLI process whose stdout events and exit are handed to the owner's callbacks."""

    def __init__(
        self,
        name: str,
        proc: asyncio.subprocess.Process,
        capture: WireCapture,
        *,
        on_event: OnEvent,
        on_exit: OnExit,
        on_output: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self.pid = proc.pid
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL)
        self._proc = proc
        self._capture = capture
        self._on_event = on_event
        self._on_exit = on_exit
        self._on_output = on_output
        self._end_reason: str | None = None
        self._expected = False
        self.exited: Exited | None = None  # set once the exit is reported, after the output is read
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(
        cls,
        name: str,
        spec: SpawnSpec,
        *,
        capture_dir: Path,
        secrets: Iterable[str],
        spawn: Spawn,
        on_event: OnEvent,
        on_exit: OnExit,
        on_output: Callable[[], None] = lambda: None,
    ) -> CliProcess:
        """Write the spec's files, spawn it with its wire capture open and start reading; OSError propagates."""
        for path, text in spec.files.items():
            _write_private(path, text)
        secrets = tuple(secrets)
        capture = WireCapture(capture_dir, spec.session_id, secrets=secrets)
        shown = {"argv": spec.redacted_argv(secrets), "env": spec.redacted_env(secrets), "cwd": str(spec.cwd)}
        capture.note("spawn " + json.dumps(shown))
        try:
            proc = await spawn(spec)
        except OSError as exc:
            capture.note(f"spawn failed: {exc}")
            capture.close()
            raise
        capture.write_meta(label=name, pid=proc.pid)
        process = cls(name, proc, capture, on_event=on_event, on_exit=on_exit, on_output=on_output)
        readers = [process._track(process._read_stdout()), process._track(process._read_stderr())]
        process._track(process._watch_exit(readers))
        return process

    @property
    def alive(self) -> bool:
        return self._proc.returncode is None

    @property
    def ending(self) -> bool:
        """We asked it to end (a kill or a stop), whether or not it has yet."""
        return self._end_reason is not None

    async def send(self, message: Mapping[str, Any]) -> bool:
        """Write one stream-json line to stdin; False when the process can no longer take it."""
        stdin = self._proc.stdin
        if stdin is None or not self.alive:
            return False
        try:
            stdin.write((json.dumps(message) + "\n").encode())
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            # The exit watch reports the death; whoever owns the turn restarts from there.
            log.warning("%s: could not write to the CLI: %s", self.name, exc)
            return False
        return True

    def kill(self, reason: str, *, expected: bool) -> None:
        """SIGKILL now; the exit is reported with `reason`, as a crash unless `expected`."""
        if not self.alive:
            return
        self._end_reason = reason
        self._expected = expected
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()

    async def terminate(self, reason: str) -> None:
        """End it cleanly (stdin closed, then SIGTERM, then SIGKILL) and return once its exit is reported."""
        proc = self._proc
        if self.alive:
            self._expected = True
            self._end_reason = reason
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            for signal_it in (None, proc.terminate, proc.kill):
                if signal_it is not None:
                    with contextlib.suppress(ProcessLookupError):
                        signal_it()
                try:
                    await asyncio.wait_for(proc.wait(), _STOP_GRACE)
                    break
                except TimeoutError:
                    continue
        # The exit watch records the exit before anyone can start a successor (bounded: a grandchild
        # holding the pipes open must not hold up a stop).
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=_STOP_GRACE)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        while True:
            try:
                raw = await self._proc.stdout.readline()
            except ValueError as exc:  # a line beyond the limit: lose it, keep reading
                log.warning("%s: skipped an oversized stdout line: %s", self.name, exc)
                continue
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace")
            self._capture.stdout(line)
            self._on_output()
            for event in parse_line(line):
                await self._on_event(self, event)

    async def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        while True:
            try:
                raw = await self._proc.stderr.readline()
            except ValueError:
                continue
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip()
            self._capture.stderr(line)
            self.stderr_tail.append(line)
            log.debug("%s stderr: %s", self.name, line)

    async def _watch_exit(self, readers: list[asyncio.Task[None]]) -> None:
        code = await self._proc.wait()
        await asyncio.gather(*readers, return_exceptions=True)
        reason = self._end_reason or (f"it exited with code {code}" if code is not None else "it exited")
        capture = self._capture
        capture.note(f"exit code={code} reason={reason} expected={self._expected}")
        capture.write_meta(label=self.name, pid=None)
        capture.close()
        cc.info("[CC.exit] %s pid=%s code=%s (%s)", self.name, self.pid, code, reason)
        self.exited = Exited(pid=self.pid, code=code, reason=reason, expected=self._expected)
        self._on_exit(self, self.exited)

    def _track(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _write_private(path: Path, text: str) -> None:
    """Write a file only this user can read (the MCP config holds the worker's bearer token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o600)
