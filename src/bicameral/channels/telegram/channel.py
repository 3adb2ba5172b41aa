"""The Telegram channel: our own long-polling loop that acknowledges only persisted updates."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from telegram import Bot, BotCommand, BotCommandScopeChat, BotCommandScopeDefault
from telegram.error import Conflict, EndPointNotFound, InvalidToken, RetryAfter, TelegramError

from bicameral.backoff import Backoff
from bicameral.channels.base import InboundSink, OnEnd
from bicameral.channels.downloads import AttachmentSaver
from bicameral.errors import ChannelStartError, ConfigError
from bicameral.events import Action, ActionResult, Capabilities, CommandMenu, Inbound, owner_on
from bicameral.imports import warm_in_background
from bicameral.net import Proxies
from bicameral.redaction import Redactor
from bicameral.types import Sleep

from .actions import ActionPerformer, retry_seconds
from .admins import AdminLookup
from .media import telegram_download
from .request import BotRequest
from .updates import BotIdentity, translate

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0
# A server that answers getUpdates at once (a proxy, a local Bot API server, a zero timeout) is asked
# about once a second while idle, never more often than the floor allows: a message still shows
# within about a second, and an idle bot costs next to nothing.
IDLE_INTERVAL = 1.0
IDLE_FLOOR = 0.25
CONNECTIONS = 32  # connections kept alive: the actions' in-flight cap, plus the long poll and file downloads
BAD_TOKEN = "Telegram rejected the token: check BICAMERAL_TELEGRAM_TOKEN"
CONFLICT = (
    "Telegram reports another process polling this bot token (409 Conflict): "
    "stop the other bicameral instance or webhook"
)


@dataclass(frozen=True)
class TelegramConfig:
    """What the Telegram channel is given: the bot's token and the Bot API's address, the long poll's timeout,
    the proxy variables that are set, the name the bot is addressed by in groups, where received files are
    kept (and sent files must be), how often "typing" is refreshed."""

    token: SecretStr | None
    api_url: str
    poll_timeout: int
    proxy_variables: Mapping[str, str]
    bot_name: str
    data_dir: Path
    attachments_dir: Path
    typing_interval_seconds: float


class TelegramChannel:
    """Receives Telegram messages as Inbound values and performs Actions via the Bot API."""

    name = "telegram"
    capabilities = Capabilities(max_text=4096, threads=True)

    def __init__(
        self,
        config: TelegramConfig,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if config.token is None or not config.token.get_secret_value():
            raise ConfigError("BICAMERAL_TELEGRAM_TOKEN is not set")
        self._token = config.token.get_secret_value()
        self._config = config
        self._redactor = Redactor([self._token])
        self._sleep = sleep
        self._clock = clock
        if ":" not in self._token or any(ch.isspace() for ch in self._token):
            raise ConfigError("BICAMERAL_TELEGRAM_TOKEN is not a valid bot token (expected <id>:<secret>)")
        api = config.api_url.rstrip("/")
        # One connection pool for every call, the long poll included (see _get_updates).
        self._request = BotRequest(
            connect_timeout=10,
            read_timeout=30,
            write_timeout=30,
            media_write_timeout=60,
            connections=CONNECTIONS,
            proxies=Proxies.from_environment(config.proxy_variables),
        )
        self._bot = Bot(
            self._token,
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=self._request,
            get_updates_request=self._request,
        )
        self._media = AttachmentSaver(
            telegram_download(self._bot), data_dir=config.data_dir, attachments_dir=config.attachments_dir,
            redact=self._redact,
        )
        self._actions = ActionPerformer(
            self._bot,
            data_dir=config.data_dir,
            typing_interval_seconds=config.typing_interval_seconds,
            sleep=sleep,
            redact=self._redact,
            clock=clock,
        )
        self._admins = AdminLookup(self._bot, redact=self._redact, clock=clock)
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
        await self.start_sending()
        self._on_end = on_end
        self._task = asyncio.create_task(self._poll(sink), name="telegram-poll")
        warm_in_background(f"{__package__}.format")  # markdown-it, for the first reply; not worth delaying the poll

    async def start_sending(self) -> None:
        """Learn who we are (getMe) and send only: a worker that runs turns while another one polls."""
        try:
            await self._bot.initialize()  # getMe
        except InvalidToken:
            raise ChannelStartError(BAD_TOKEN) from None
        except TelegramError as exc:
            raise ChannelStartError(self._redact(f"cannot reach Telegram: {exc.message}")) from None
        me = self._bot.bot
        self._identity = BotIdentity(id=me.id, username=me.username or "")
        log.info("telegram: connected as @%s (id %s)", self._identity.username, me.id)

    async def stop(self) -> None:
        """Cancel polling and close the HTTP connections."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Our own request, not bot.shutdown(): that skips the client of a bot that never started.
        await self._request.shutdown()

    async def perform(self, action: Action) -> ActionResult:
        """Carry out one action; failures come back in the result, never as exceptions."""
        return await self._actions.perform(action)

    async def fetch_attachments(self, inbound: Inbound) -> Inbound:
        """Download the files of an admitted message; one that cannot be fetched becomes a marker in its text."""
        return await self._media.fetch_all(inbound)

    async def show_commands(self, menu: CommandMenu) -> None:
        """Telegram's command menu: everyone's commands by default, the owner's beside them in the owner's chats."""
        everyone = [BotCommand(name, summary[:256]) for name, summary in menu.everyone]
        try:
            await self._bot.set_my_commands(everyone, scope=BotCommandScopeDefault())
            owner_id = owner_on(menu.owner_id, self.name)
            if owner_id is not None:
                owner = everyone + [BotCommand(name, summary[:256]) for name, summary in menu.owner]
                await self._bot.set_my_commands(owner, scope=BotCommandScopeChat(owner_id))
        except TelegramError as exc:
            # The menu only hides commands; the owner check is what guards them.
            log.warning("telegram: could not set the command menu: %s", self._explain(exc))

    # --- receiving ---

    async def _poll(self, sink: InboundSink) -> None:
        backoff = Backoff(BACKOFF_START, BACKOFF_MAX)
        timeout = self._config.poll_timeout
        while True:
            started = self._clock()
            try:
                raw = await self._get_updates(timeout)
            except (InvalidToken, EndPointNotFound):
                # After getMe succeeded PTB reports a rejected token as an unknown endpoint.
                self._give_up(BAD_TOKEN)
                return
            except Conflict:
                self._give_up(CONFLICT)
                return
            except RetryAfter as exc:
                await self._sleep(min(retry_seconds(exc), BACKOFF_MAX))
                continue
            except Exception as exc:
                delay = backoff.next()
                log.warning("telegram getUpdates failed (%s); retrying in %.0fs", self._explain(exc), delay)
                await self._sleep(delay)
                continue
            backoff.reset()
            if raw and await self._deliver(raw, sink):
                continue
            # Nothing new, or nothing the offset could move past (updates without an id): rest.
            pause = idle_pause(self._clock() - started, timeout)
            if pause:
                await self._sleep(pause)

    async def _get_updates(self, timeout: int) -> list[Any]:
        """One long poll, answered as raw update dicts; asking with an offset acknowledges what lies below it."""
        # Raw dicts, not Bot.get_updates: one malformed update must not fail the batch. Bot API method
        # names are case-insensitive, and the lower-case name keeps PTB from warning that a typed
        # method exists.
        result = await self._bot.do_api_request(
            "getupdates",
            api_kwargs={"offset": self._next_offset, "timeout": timeout, "allowed_updates": ALLOWED_UPDATES},
            # The HTTP request must outlive the long poll it carries.
            read_timeout=timeout + 15,
        )
        if not isinstance(result, list):
            raise TelegramError(f"getUpdates answered {type(result).__name__}, not a list")
        return result

    async def _deliver(self, raw: Sequence[Any], sink: InboundSink) -> bool:
        """Translate a batch, hand it to the sink, and only then move the offset past it; False if it cannot move."""
        batch = await self._translate_all(raw)
        batch = [await self._admins.flag(inbound) for inbound in batch]
        backoff = Backoff(BACKOFF_START, BACKOFF_MAX)
        while batch:
            try:
                await sink(batch)
                break
            except Exception:
                delay = backoff.next()
                log.exception("telegram: inbound sink failed; retrying the same %d updates in %.0fs", len(batch), delay)
                await self._sleep(delay)
        await self._answer_presses(raw)
        ids = [u["update_id"] for u in raw if isinstance(u, dict) and type(u.get("update_id")) is int]
        if not ids:
            return False
        # The next getUpdates carries this offset, which is what acknowledges the batch.
        self._next_offset = max(ids) + 1
        return True

    def answered_later(self, press_id: str) -> None:
        self._actions.answered_presses.add(press_id)

    async def _answer_presses(self, raw: Sequence[Any]) -> None:
        """Answer every press of the batch that the core left unanswered (refused, malformed, a duplicate): a press
        Telegram never hears back about keeps spinning on the presser's screen."""
        for item in raw:
            query = item.get("callback_query") if isinstance(item, dict) else None
            press_id = query.get("id") if isinstance(query, dict) else None
            if not isinstance(press_id, str) or press_id in self._actions.answered_presses:
                continue
            self._actions.answered_presses.add(press_id)
            try:
                await self._bot.do_api_request("answercallbackquery", api_kwargs={"callback_query_id": press_id})
            except Exception as exc:  # cosmetic: the spinner stops by itself after a while
                log.info("telegram: could not answer a button press: %s", self._explain(exc))

    async def _translate_all(self, raw: Sequence[Any]) -> list[Inbound]:
        assert self._identity is not None  # start() sets it before polling begins
        batch: list[Inbound] = []
        for item in raw:
            try:
                inbound = translate(item, self._identity, self._config.bot_name)
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
        detail = exc.message if isinstance(exc, TelegramError) else str(exc)
        return self._redact(f"{type(exc).__name__}: {detail}")

    def _redact(self, text: str) -> str:
        # HTTP errors can embed request URLs, and Bot API URLs contain the token.
        return self._redactor(text)


def idle_pause(elapsed: float, timeout: int) -> float:
    """How long to rest after an empty poll that took `elapsed` seconds of a `timeout`-second long poll."""
    if timeout > 0 and elapsed >= timeout:
        return 0.0  # the server held the poll for its whole timeout: it paces us already
    return max(IDLE_FLOOR, IDLE_INTERVAL - elapsed)
