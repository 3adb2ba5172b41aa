"""`python -m bicameral run` as a child process wired to the fakes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import bicameral
from bench.harness import OWNER, pinned
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_server import FakeTelegram

_FOREIGN_PREFIXES = ("BICAMERAL_", "ANTHROPIC_", "OPENAI_")


def clean_env(data_dir: Path) -> dict[str, str]:
    """This environment minus any bicameral or provider settings, plus the data dir and this checkout's code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES)}
    env["BICAMERAL_DATA_DIR"] = str(data_dir)
    # The child runs from a scratch dir: point it at the code this bench imported, not whatever is installed.
    env["PYTHONPATH"] = str(Path(bicameral.__file__).parents[1])
    return env


def bot_env(
    telegram: FakeTelegram,
    models: ModelServer,
    data_dir: Path,
    mode: str | None = None,
    provider: str = "openai",
    **settings: object,
) -> dict[str, str]:
    """`bicameral run` wired to the fakes, both chambers on `provider` (openai or anthropic), plus `settings`."""
    env = clean_env(data_dir)
    env.update(
        BICAMERAL_TELEGRAM_TOKEN=telegram.token,
        BICAMERAL_TELEGRAM_API_URL=telegram.url,
        BICAMERAL_OWNER_ID=str(OWNER),
        BICAMERAL_BACK_MODEL=f"{provider}:bench",
        BICAMERAL_FRONT_MODEL=f"{provider}:bench",
        BICAMERAL_DEBOUNCE_MS="0",
        BICAMERAL_TELEGRAM_POLL_TIMEOUT="1",
    )
    if provider == "anthropic":
        env.update(ANTHROPIC_API_KEY="x", ANTHROPIC_BASE_URL=models.url)
    else:
        env.update(OPENAI_API_KEY="x", OPENAI_BASE_URL=models.openai_url)
    env.update({f"BICAMERAL_{key.upper()}": str(value) for key, value in {**pinned(mode), **settings}.items()})
    return env


def spawn_bot(
    telegram: FakeTelegram,
    models: ModelServer,
    data_dir: Path,
    mode: str | None = None,
    provider: str = "openai",
    **settings: object,
) -> subprocess.Popen[bytes]:
    """Start the assistant; its console output goes to a file next to the data dir."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir.parent / "bot-output.log", "ab") as output:
        # cwd is the scratch dir so a developer's .env or bicameral.toml cannot leak into the figures.
        return subprocess.Popen(
            [sys.executable, "-m", "bicameral", "run"],
            cwd=data_dir.parent,
            env=bot_env(telegram, models, data_dir, mode, provider, **settings),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def stop_bot(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """SIGTERM (a clean shutdown), then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_ready(
    telegram: FakeTelegram, proc: subprocess.Popen[bytes], since: float, timeout: float = 60.0
) -> float:
    """Monotonic time of the bot's first getUpdates after `since`: it is ready to receive."""
    deadline = time.monotonic() + timeout
    while True:
        polls = [c.ts for c in telegram.calls_to("getUpdates") if c.ts >= since]
        if polls:
            return min(polls)
        if proc.poll() is not None:
            raise RuntimeError(f"the bot exited with {proc.returncode} before polling; see bot-output.log")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the bot did not poll within {timeout:.0f}s")
        await asyncio.sleep(0.005)


@contextlib.contextmanager
def separate_cores(proc: subprocess.Popen[bytes]) -> Iterator[bool]:
    """The assistant on one core and this process, with the fakes, on the others while inside; False if it cannot be.

    The fakes stand in for servers elsewhere. Left to the scheduler on a small machine, a fake woken by the
    assistant's write often takes the assistant's core there and then, and the assistant waits through work
    that is not its own: about 50 ms over a 200-chat burst on 2 cores. The assistant runs one event loop, so
    one core is all it can use anyway.
    """
    if not separable():
        yield False
        return
    cores = sorted(os.sched_getaffinity(0))
    _pin(proc.pid, {cores[0]})
    _pin(os.getpid(), set(cores[1:]))
    try:
        yield True
    finally:
        _pin(os.getpid(), set(cores))


def separable() -> bool:
    """Whether `separate_cores` can give the assistant a core of its own here."""
    return hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2


def _pin(pid: int, cores: set[int]) -> None:
    """Every thread of `pid` on `cores`; threads it starts later inherit that."""
    for thread in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(thread), cores)
