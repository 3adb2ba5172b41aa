"""Wiring: build the stores, chambers and channels; start and stop them in order."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from bicameral.back.executor import NativeExecutor
from bicameral.back.runner import NativeRunner
from bicameral.back.single import SingleChamber
from bicameral.channels.base import Channel
from bicameral.config import Settings
from bicameral.front.chamber import FrontChamber
from bicameral.front.conversation import Conversation
from bicameral.front.turn import TurnHandler
from bicameral.gate.access import AccessPolicy
from bicameral.gate.gate import Gate
from bicameral.gate.ratelimit import RateLimiter
from bicameral.models import build_model
from bicameral.models.base import Model
from bicameral.outbox import Outbox
from bicameral.store import Stores
from bicameral.tasks.bus import Executor
from bicameral.tools.base import Tool
from bicameral.tools.registry import ToolRegistry, discover_tools

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """The configuration cannot work; the message says what to fix."""


@dataclass
class App:
    settings: Settings
    channels: Sequence[Channel]
    back_model: Model | None = None
    front_model: Model | None = None
    extra_tools: Sequence[Tool] = ()
    stores: Stores = field(init=False)
    outbox: Outbox = field(init=False)
    conversation: Conversation = field(init=False)
    gate: Gate = field(init=False)
    _stopped: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    _closed: bool = field(init=False, default=False)
    exit_code: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        settings = self.settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.stores = Stores.open(settings.db_path)
        self.outbox = Outbox(self.stores.messages)
        for channel in self.channels:
            self.outbox.register(channel)
        self.registry = ToolRegistry(
            [*discover_tools(), *self.extra_tools], audit=self.stores.tool_calls, timeout=settings.tool_timeout_seconds
        )
        self.mode = settings.effective_mode
        self.handler = self._build_handler()
        two_chambers = self.mode == "bicameral"
        self.conversation = Conversation(
            settings,
            self.handler,
            self.outbox,
            self.stores.messages,
            lanes_per_user_in_groups=two_chambers,
            typing_in_groups=not two_chambers,
        )
        access = AccessPolicy(settings.resolved_access_path, settings.owner_id)
        limiter = RateLimiter(self.stores.ratelimits, settings.rate_limit_per_min)
        self.gate = Gate(settings, access, self.stores, self.outbox, self.conversation.submit, limiter)

    def _build_handler(self) -> TurnHandler:
        """The chamber that answers turns, chosen by the executor and the mode."""
        settings = self.settings
        if self.mode != settings.mode:
            log.info("bicameral mode needs models that call tools; the local model runs in single mode")
        if settings.back.provider == "claude-code" and self.mode == "single":
            from bicameral.claude_code.handler import ClaudeCodeChamber

            return ClaudeCodeChamber(settings, self.stores, self.registry, self.outbox.perform, on_fatal=self.fail)
        if settings.back.provider == "claude-code":
            from bicameral.claude_code.executor import ClaudeCodeExecutor

            executor: Executor = ClaudeCodeExecutor(settings, self.stores, self.registry)
        else:
            back_model = self.back_model or build_model(settings.back_model, settings)
            if self.mode == "single":
                return SingleChamber(settings, self.stores, self._runner(back_model, self.registry))
            executor = NativeExecutor(settings, self.stores, self._runner(back_model, self.registry.subset(exclude_messaging=True)))
        front_model = self.front_model or build_model(settings.front_model, settings)
        return FrontChamber(settings, self.stores, front_model, executor, self.outbox.perform)

    def _runner(self, model: Model, tools: ToolRegistry) -> NativeRunner:
        settings = self.settings
        return NativeRunner(
            model,
            tools,
            max_iterations=settings.max_iterations,
            max_tokens=settings.max_tokens,
            max_errors=settings.tool_error_max_count,
            error_window_seconds=settings.tool_error_window_seconds,
        )

    async def start(self) -> None:
        await self.handler.start()
        for channel in self.channels:
            await channel.start(self.gate)
            log.info("channel %s ready", channel.name)
        await self.conversation.recover()
        # Everything imported so far lives for the whole run: keep it out of full collections,
        # which otherwise stall a turn for ~150 ms now and then.
        gc.freeze()
        log.info("ready (mode=%s, back=%s, front=%s)", self.mode, self.settings.back_model, self.settings.front_model)

    def request_stop(self) -> None:
        self._stopped.set()

    def fail(self, reason: str) -> None:
        """Stop with a failure status (e.g. an executor that gave up); `bicameral run` then exits non-zero."""
        log.critical("stopping: %s", reason)
        self.exit_code = 1
        self.request_stop()

    async def wait(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        for channel in self.channels:
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", channel.name)
        await self.conversation.close()
        await self.handler.stop()
        self.stores.close()
        log.info("stopped")


def configured_channels(settings: Settings) -> list[Channel]:
    """The channels `bicameral run` serves, from the settings."""
    channels: list[Channel] = []
    if settings.telegram_token is not None:
        from bicameral.channels.telegram import TelegramChannel

        channels.append(TelegramChannel(settings))
    if not channels:
        raise ConfigError(
            "no channel is configured: set BICAMERAL_TELEGRAM_TOKEN (from @BotFather) to serve Telegram, "
            "or run `bicameral chat` to talk in this terminal"
        )
    return channels
