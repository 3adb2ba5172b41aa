"""Shared setup: timed fakes, bench settings, an in-process app, percentiles and RSS sampling."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import psutil

from bicameral.app import App, telegram_config
from bicameral.channels.telegram import TelegramChannel
from bicameral.config import Settings
from bicameral.observe.logs import setup_logging
from tests.fakes.model_server import ModelServer, Reply, Request
from tests.fakes.telegram_server import FakeTelegram

OWNER = 1001
MIB = 1024 * 1024
TAG = re.compile(r"\bbench-(\d+)\b")


class TimedTelegram(FakeTelegram):
    """FakeTelegram that also records when each update was handed to the bot, and counts replies."""

    def __init__(self) -> None:
        super().__init__()
        self._timing_lock = threading.Lock()
        self.handed_out: dict[tuple[int, int], float] = {}  # (chat_id, message_id) -> first delivery
        self.replies = 0

    async def _m_get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        batch = await super()._m_get_updates(params)
        now = time.monotonic()
        with self._timing_lock:
            for update in batch:
                message = update.get("message") or {}
                key = (int(message.get("chat", {}).get("id", 0)), int(message.get("message_id", 0)))
                self.handed_out.setdefault(key, now)
        return batch

    def _m_send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        result = super()._m_send_message(params)
        # A plain counter lets waiters poll cheaply; sent_messages() deep-copies the whole history.
        with self._timing_lock:
            self.replies += 1
        return result

    def send_calls(self) -> list[tuple[str, float]]:
        """(text, ts) of every answered sendMessage, in arrival order."""
        return [(str(c.params.get("text", "")), c.ts) for c in self.calls_to("sendMessage") if c.status == 200]


def tag(i: int) -> str:
    """The marker that ties a user message to its model request and its reply."""
    return f"bench-{i}"


def tag_of(text: str) -> int | None:
    """The N of the last bench-N marker in `text` (the newest message comes after any history), if any."""
    found = TAG.findall(text)
    return int(found[-1]) if found else None


def tagged_responder(latency: float) -> Callable[[Request], Reply]:
    """A model that answers "ok bench-N" to the message tagged bench-N after `latency` s; untagged at once."""

    def respond(req: Request) -> Reply:
        found = tag_of(req.last_user_text())
        if found is None:
            return Reply(text="ok")
        return Reply(text=f"ok {tag(found)}", latency=latency)

    return respond


@contextmanager
def fakes() -> Iterator[tuple[TimedTelegram, ModelServer]]:
    """A started TimedTelegram and ModelServer, stopped on exit."""
    telegram = TimedTelegram().start()
    models = ModelServer().start()
    try:
        yield telegram, models
    finally:
        models.stop()
        telegram.stop()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection in this process meanwhile, for bursts against an assistant in its own process.

    Only the fakes live here then, and they keep every call and request they served: a full collection
    of those stalled both fakes for 60-160 ms mid-burst, time the assistant never spent.
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def shipped_mode() -> str:
    """The mode bicameral runs in when none is configured."""
    return str(Settings.model_fields["mode"].default)


def pinned(mode: str | None) -> dict[str, object]:
    """Settings every scenario fixes: the mode, and no deliberate typing pauses (pacing is not overhead)."""
    wanted: dict[str, object] = {"mode": mode or shipped_mode(), "delivery_pause_scale": 0.0}
    return {key: value for key, value in wanted.items() if key in Settings.model_fields}


def bench_settings(
    root: Path, telegram: FakeTelegram, models: ModelServer, mode: str | None = None, **overrides: object
) -> Settings:
    """Defaults as shipped, except: wired to the fakes, no debounce, short polls, and `pinned`."""
    values: dict[str, object] = dict(
        telegram_token=telegram.token,
        telegram_api_url=telegram.url,
        telegram_poll_timeout=1,
        owner_id=OWNER,
        back_model="openai:bench",
        front_model="openai:bench",
        openai_api_key="x",
        openai_base_url=models.openai_url,
        debounce_ms=0,
        **pinned(mode),
    )
    values.update(overrides)
    return Settings.for_test(root, **values)


def open_access(data_dir: Path) -> None:
    """Let any chat talk to the bot (written before start, as an operator would)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "access.json").write_text(json.dumps({"policy": "open"}) + "\n", encoding="utf-8")


@contextmanager
def file_logging(settings: Settings) -> Iterator[None]:
    """Log as `bicameral run` does (INFO, JSON file) minus the console, and undo it afterwards."""
    root = logging.getLogger()
    level = root.level
    setup_logging(settings.log_level, settings.logs_dir, settings.secret_values(), console=False)
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if getattr(h, "_bicameral", False)]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[App]:
    """The real assistant serving the fake Telegram in this event loop."""
    with file_logging(settings):
        app = App(settings, [TelegramChannel(telegram_config(settings))])
        await app.start()
        try:
            yield app
        finally:
            await app.stop()


async def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.005) -> None:
    """Poll `predicate` without blocking the loop; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"condition not met within {timeout:.0f}s")
        await asyncio.sleep(interval)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def rss(pid: int) -> int:
    """Resident set size of a process and its children (tools may spawn some), in bytes."""
    proc = psutil.Process(pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class RssSampler:
    """Samples a process's RSS on a thread until stopped; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self._pid = pid
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak = 0

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            try:
                self.peak = max(self.peak, rss(self._pid))
            except psutil.NoSuchProcess:
                return
            if self._stop.wait(self._interval):
                return

