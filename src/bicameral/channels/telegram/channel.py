"""The Telegram channel: our own long-polling loop that acknowledges only persisted updates."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.session.base import BaseSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    TelegramAPIError,
    TelegramConflictError,
    TelegramRetryAfter,
    TelegramUnauthorizedError,
)
from aiogram.methods import GetUpdates
from aiogram.utils.token import TokenValidationError

from bicameral.backoff import Backoff
from bicameral.channels.base import InboundSink, OnEnd
from bicameral.config import Settings
from bicameral.errors import ChannelStartError, ConfigError
from bicameral.events import Action, ActionResult, Capabilities, Inbound
from bicameral.redaction import Redactor

from .actions import ActionPerformer, Sleep
from .admins import with_admin_flag
from .media import AttachmentStore
from .updates import BotIdentity, translate

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ["message", "edited_message"]
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0
BAD_TOKEN = "Telegram rejected the token: check BICAMERAL_TELEGRAM_TOKEN"
CONFLICT = (
    "Telegram reports another process polling this bot token (409 Conflict): "
    "stop the other bicameral instance or webhook"
)


class TelegramChannel:
    """Receives Telegram messages as Inbound values and performs Actions via the Bot API."""

    name = "telegram"
    capabilities = Capabilities(max_text=4096, threads=True)

    def __init__(
        self,
        settings: Settings,
        *,
        session: BaseSession | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if settings.telegram_token is None or not settings.telegram_token.get_secret_value():
            raise ConfigError("BICAMERAL_TELEGRAM_TOKEN is not set")
        self._token = settings.telegram_token.get_secret_value()
        self._settings = settings
        self._redactor = Redactor([self._token])
        self._sleep = sleep
        session = session or AiohttpSession(api=TelegramAPIServer.from_base(settings.telegram_api_url))
        try:
            self._bot = Bot(self._token, session=session)
        except TokenValidationError:
            raise ConfigError("BICAMERAL_TELEGRAM_TOKEN is not a valid bot token (expected <id>:<secret>)") from None
        self._media = AttachmentStore(self._bot, settings, redact=self._redact)
        self._actions = ActionPerformer(self._bot, settings, sleep=sleep, redact=self._redact)
        self._identity: BotIdentity | None = None
        self._task: asyncio.Task[None] | None = None
        self._next_offset: int | None = None
        self.failure: str | None = None  # set when polling stopped for good (bad token, conflict)

    @property
    def identity(self) -> BotIdentity | None:
        """The bot's id and username, known after start()."""
        return self._identity

    @property
    def polling(self) -> bool:
        """Whether the receive loop is running."""
        return self._task is not None and not self._task.done()

    async def start(self, sink: InboundSink, on_end: OnEnd) -> None:
        """Learn who we are (getMe), then launch the polling loop in the background."""
        try:
            me = await self._bot.get_me()
        except TelegramUnauthorizedError:
            raise ChannelStartError(BAD_TOKEN) from None
        except TelegramAPIError as exc:
            raise ChannelStartError(self._redact(f"cannot reach Telegram: {exc.message}")) from None
        self._identity = BotIdentity(id=me.id, username=me.username or "")
        log.info("telegram: connected as @%s (id %s)", self._identity.username, me.id)
        self._on_end = on_end
        self._task = asyncio.create_task(self._poll(sink), name="telegram-poll")

    async def stop(self) -> None:
        """Cancel polling and close the HTTP session."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._bot.session.close()

    async def perform(self, action: Action) -> ActionResult:
        """Carry out one action; failures come back in the result, never as exceptions."""
        return await self._actions.perform(action)

    # --- receiving ---

    async def _poll(self, sink: InboundSink) -> None:
        backoff = Backoff(BACKOFF_START, BACKOFF_MAX)
        timeout = self._settings.telegram_poll_timeout
        while True:
            try:
                raw = await self._bot(
                    _RawGetUpdates(offset=self._next_offset, timeout=timeout, allowed_updates=ALLOWED_UPDATES),
                    # The HTTP request must outlive the long poll it carries.
                    request_timeout=timeout + 15,
                )
            except TelegramUnauthorizedError:
                self._give_up(BAD_TOKEN)
                return
            except TelegramConflictError:
                self._give_up(CONFLICT)
                return
            except TelegramRetryAfter as exc:
                await self._sleep(min(float(exc.retry_after), BACKOFF_MAX))
                continue
            except Exception as exc:
                delay = backoff.next()
                log.warning("telegram getUpdates failed (%s); retrying in %.0fs", self._explain(exc), delay)
                await self._sleep(delay)
                continue
            backoff.reset()
            if raw:
                await self._deliver(raw, sink)

    async def _deliver(self, raw: Sequence[Any], sink: InboundSink) -> None:
        """Translate a batch, hand it to the sink, and only then move the offset past it."""
        batch = await self._translate_all(raw)
        batch = [await with_admin_flag(self._bot, inbound, self._redact) for inbound in batch]
        backoff = Backoff(BACKOFF_START, BACKOFF_MAX)
        while batch:
            try:
                await sink(batch)
                break
            except Exception:
                delay = backoff.next()
                log.exception("telegram: inbound sink failed; retrying the same %d updates in %.0fs", len(batch), delay)
                await self._sleep(delay)
        ids = [u["update_id"] for u in raw if isinstance(u, dict) and type(u.get("update_id")) is int]
        if ids:
            # The next getUpdates carries this offset, which is what acknowledges the batch.
            self._next_offset = max(ids) + 1

    async def _translate_all(self, raw: Sequence[Any]) -> list[Inbound]:
        assert self._identity is not None  # start() sets it before polling begins
        batch: list[Inbound] = []
        for item in raw:
            try:
                inbound = await translate(item, self._identity, self._settings, fetch=self._media.fetch)
            except Exception as exc:
                update_id = item.get("update_id", "?") if isinstance(item, dict) else "?"
                log.warning("skipping malformed update %s: %s", update_id, self._explain(exc))
                continue
            if inbound is not None:
                batch.append(inbound)
        return batch

    # --- helpers ---

    def _give_up(self, reason: str) -> None:
        self.failure = reason
        log.error("%s; telegram polling stopped", reason)
        self._on_end(reason)

    def _explain(self, exc: BaseException) -> str:
        detail = exc.message if isinstance(exc, TelegramAPIError) else str(exc)
        return self._redact(f"{type(exc).__name__}: {detail}")

    def _redact(self, text: str) -> str:
        # HTTP errors can embed request URLs, and Bot API URLs contain the token.
        return self._redactor(text)


class _RawGetUpdates(GetUpdates):
    """getUpdates returning raw dicts, so one malformed update cannot fail the whole batch."""

    __returning__ = list[Any]
