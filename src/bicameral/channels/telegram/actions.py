"""Performing core Actions against the Bot API: formatting, fallbacks, clean errors.

Every call is made once. When Telegram asks us to slow down (429), the result says how long to wait
(`retry_after`) and the outbox, the one place that waits, tries again; a text split into several
messages reports the parts that arrived, so the next attempt sends only the rest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from telegram import Bot, InputFile
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter, TelegramError

from bicameral.events import (
    Action,
    ActionResult,
    AnswerPress,
    DeleteMessage,
    EditText,
    React,
    SendFile,
    SendText,
    Typing,
    split_chat_key,
)
from bicameral.folders import resolve_under
from bicameral.types import Sleep

from . import api

log = logging.getLogger(__name__)

T = TypeVar("T")
# Sends one piece of text with a parse mode (None = plain) and returns what Telegram answered.
_TextCall = Callable[[str, ParseMode | None], Awaitable[T]]

MAX_TEXT = 4096
ANSWERED_KEPT = 1000
# Bot API calls in flight at once: a burst of hundreds of replies queues here, in order, rather than
# opening a connection to Telegram for each.
IN_FLIGHT = 16


class ActionPerformer:
    """Turns one Action into Bot API calls; never raises for platform failures.

    Calls go out through `api`, as JSON both ways: of an answer only the new message's id is read.
    """

    def __init__(
        self,
        bot: Bot,
        *,
        data_dir: Path,  # files are sent only from inside it
        typing_interval_seconds: float,
        sleep: Sleep | None = None,  # not used: waiting out a rate limit is the outbox's
        redact: Callable[[str], str] = str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bot = bot
        self._data_dir = data_dir
        self._typing_interval = typing_interval_seconds
        self._redact = redact
        self._clock = clock
        self._slots = asyncio.Semaphore(IN_FLIGHT)
        self._typing_shown: dict[int, dict[int | None, float]] = {}  # chat -> thread -> when typing was sent
        self.answered_presses: set[str] = set()  # presses answered (the channel answers the rest of a batch)

    async def perform(self, action: Action) -> ActionResult:
        """Carry out `action`, reporting any Telegram, network or input problem in the result."""
        try:
            chat_id = telegram_chat_id(action.chat)
            if not isinstance(action, Typing | React | AnswerPress):
                self._typing_ended(chat_id)
            if isinstance(action, SendText):
                return await self._send_text(chat_id, action)
            if isinstance(action, EditText):
                return await self._edit_text(chat_id, action)
            if isinstance(action, DeleteMessage):
                return await self._delete(chat_id, action)
            if isinstance(action, React):
                return await self._react(chat_id, action)
            if isinstance(action, Typing):
                return await self._typing(chat_id, action)
            if isinstance(action, SendFile):
                return await self._send_file(chat_id, action)
            if isinstance(action, AnswerPress):
                return await self._answer_press(action)
            return ActionResult.failed(f"telegram cannot perform {type(action).__name__}")
        except TelegramError as exc:
            return ActionResult(ok=False, error=self.describe(exc, action), retry_after=retry_after(exc))
        except ValueError as exc:
            return ActionResult.failed(str(exc))
        except OSError as exc:
            return ActionResult.failed(f"cannot read file: {exc}")
        except Exception as exc:
            log.exception("unexpected error performing %s", type(action).__name__)
            return ActionResult.failed(self._redact(f"unexpected error: {type(exc).__name__}: {exc}"))

    def describe(self, exc: BaseException, action: Action) -> str:
        """A clear one-line account of a Bot API failure, with the token redacted."""
        what = type(action).__name__
        if isinstance(exc, RetryAfter):
            text = f"Telegram rate limit: asked to wait {retry_seconds(exc):.0f}s"
        elif isinstance(exc, ChatMigrated):
            text = f"the group became a supergroup; its new chat id is {exc.new_chat_id}"
        elif isinstance(exc, Forbidden):
            text = f"Telegram refused ({what}): {exc.message}"
        elif isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):  # PTB derives BadRequest from it
            text = f"network error talking to Telegram: {exc.message}"
        elif isinstance(exc, TelegramError):
            text = f"Telegram {what} failed: {exc.message}"
        else:
            text = f"{type(exc).__name__}: {exc}"
        return self._redact(text)

    # --- one method per action ---

    async def _send_text(self, chat_id: int, action: SendText) -> ActionResult:
        if not action.text.strip():
            return ActionResult.failed("nothing to send: the text is empty")
        thread = _optional_int(action.thread_id, "thread id")
        reply_to = _reply_target(action.reply_to, chat_id)
        # Parts an earlier attempt delivered are not sent again: the split of the same text is the same.
        sent: list[str] = list(action.sent_parts)
        from .split import split_for_telegram  # markdown-it: warmed in the background at start

        chunks = split_for_telegram(action.text, limit=MAX_TEXT)
        for index, chunk in enumerate(chunks):
            if index < len(action.sent_parts):
                continue
            # Buttons go under the last part, where the question ends.
            markup = inline_keyboard(action.buttons) if index == len(chunks) - 1 else None

            def send_chunk(
                reply: dict[str, Any] | None, chunk: str = chunk, markup: dict[str, Any] | None = markup
            ) -> Awaitable[int]:
                def send(text: str, mode: ParseMode | None) -> Awaitable[int]:
                    params = {
                        "chat_id": chat_id,
                        "text": text,
                        "parse_mode": mode,
                        "reply_parameters": reply,
                        "message_thread_id": thread,
                        "reply_markup": markup,
                    }
                    return api.send(self._bot, "sendMessage", params)

                return self._formatted(send, chunk)

            try:
                # Only the first chunk replies; the rest follow it as a continuation.
                message_id = await self._replying(send_chunk, chat_id, reply_to if index == 0 else None)
            except TelegramError as exc:
                # Report what did arrive: a retry resumes after it, and the core can edit or delete it.
                return ActionResult(
                    ok=False, message_ids=tuple(sent), error=self.describe(exc, action), retry_after=retry_after(exc)
                )
            sent.append(str(message_id))
        return ActionResult(ok=True, message_ids=tuple(sent))

    async def _edit_text(self, chat_id: int, action: EditText) -> ActionResult:
        message_id = _required_int(action.message_id, "message id")
        if not action.text.strip():
            return ActionResult.failed("nothing to send: the text is empty")

        def edit(text: str, mode: ParseMode | None) -> Awaitable[object]:
            params = {"chat_id": chat_id, "message_id": message_id, "text": text, "parse_mode": mode}
            return api.call(self._bot, "editMessageText", params)

        try:
            await self._formatted(edit, action.text)
        except BadRequest as exc:
            # Re-sending identical content is a no-op for the user, not a failure.
            if "message is not modified" not in exc.message.lower():
                raise
        return ActionResult(ok=True, message_ids=(action.message_id,))

    async def _delete(self, chat_id: int, action: DeleteMessage) -> ActionResult:
        message_id = _required_int(action.message_id, "message id")
        try:
            await self._call(
                lambda: api.call(self._bot, "deleteMessage", {"chat_id": chat_id, "message_id": message_id})
            )
        except BadRequest as exc:
            # Already gone is the state we wanted.
            if "message to delete not found" not in exc.message.lower():
                raise
        return ActionResult(ok=True, message_ids=(action.message_id,))

    async def _react(self, chat_id: int, action: React) -> ActionResult:
        message_id = _required_int(action.message_id, "message id")
        params = {"chat_id": chat_id, "message_id": message_id, "reaction": [{"type": "emoji", "emoji": action.emoji}]}
        await self._call(lambda: api.call(self._bot, "setMessageReaction", params))
        return ActionResult(ok=True, message_ids=(action.message_id,))

    async def _typing(self, chat_id: int, action: Typing) -> ActionResult:
        """Show "typing"; skipped while it still shows, and while every call slot is busy (it is cosmetic)."""
        thread = _optional_int(action.thread_id, "thread id")
        shown = self._typing_shown.get(chat_id, {})
        now = self._clock()
        # Telegram shows "typing" for about 5 s or until our next message: a second one within half the
        # refresh interval (the turn's and the delivery's, back to back) adds nothing.
        fresh = thread in shown and now - shown[thread] < self._typing_interval / 2
        if fresh or self._slots.locked():
            return ActionResult(ok=True)
        self._typing_shown.setdefault(chat_id, {})[thread] = now
        try:
            params = {"chat_id": chat_id, "action": ChatAction.TYPING, "message_thread_id": thread}
            await self._call(lambda: api.call(self._bot, "sendChatAction", params))
        except BaseException:
            self._typing_shown.get(chat_id, {}).pop(thread, None)
            raise
        return ActionResult(ok=True)

    async def _answer_press(self, action: AnswerPress) -> ActionResult:
        """answerCallbackQuery: stops the client's spinner, with the note as a small toast."""
        self.answered_presses.add(action.press_id)
        if len(self.answered_presses) > ANSWERED_KEPT:
            self.answered_presses.clear()  # only a batch in flight ever asks; old ids are never looked up
            self.answered_presses.add(action.press_id)
        params = {"callback_query_id": action.press_id, "text": action.text[:200] or None}
        await self._call(lambda: api.call(self._bot, "answerCallbackQuery", params))
        return ActionResult(ok=True)

    def _typing_ended(self, chat_id: int) -> None:
        """A message from the bot ends its "typing" in every thread of the chat."""
        self._typing_shown.pop(chat_id, None)

    async def _send_file(self, chat_id: int, action: SendFile) -> ActionResult:
        path = self._inside_data_dir(action.path)
        if path is None:
            return ActionResult.failed("path outside data dir")
        if not path.is_file():
            return ActionResult.failed(f"file not found: {action.path}")
        thread = _optional_int(action.thread_id, "thread id")
        reply_to = _reply_target(action.reply_to, chat_id)
        # Read once: the photo refused and resent as a document sends the same bytes, and PTB cannot rewind a file.
        upload = InputFile(path.read_bytes(), filename=path.name)

        as_photo = action.kind == "photo"

        async def send_file(reply: dict[str, Any] | None) -> int:
            def send(caption: str | None, mode: ParseMode | None) -> Awaitable[int]:
                method, field = ("sendPhoto", "photo") if as_photo else ("sendDocument", "document")
                params = {
                    "chat_id": chat_id,
                    field: upload,
                    "caption": caption,
                    "parse_mode": mode,
                    "reply_parameters": reply,
                    "message_thread_id": thread,
                }
                return api.send(self._bot, method, params)

            if action.caption and action.caption.strip():
                return await self._formatted(send, action.caption)
            return await self._call(lambda: send(None, None))

        async def attempt() -> int:
            return await self._replying(send_file, chat_id, reply_to)

        try:
            message_id = await attempt()
        except BadRequest as exc:
            if not as_photo:
                raise
            # Telegram refuses some images as photos (odd dimensions, formats it cannot process); a document always fits.
            log.info("Telegram refused %s as a photo (%s); sending it as a document", path.name, exc.message)
            as_photo = False
            message_id = await attempt()
        return ActionResult(ok=True, message_ids=(str(message_id),))

    # --- shared machinery ---

    async def _replying(self, send: Callable[[dict[str, Any] | None], Awaitable[T]], chat_id: int, reply_to: int | None) -> T:
        """Send as a reply to `reply_to`; if Telegram refuses the reply target, send once more without it.

        `allow_sending_without_reply` covers a deleted referent, but Telegram still refuses some targets
        ("message to be replied not found", an invalid id): the answer matters more than the quote.
        """
        if reply_to is None:
            return await send(None)
        try:
            return await send(_reply(reply_to))
        except BadRequest as exc:
            if not reply_refused(exc):
                raise
            log.warning("Telegram refused message %s in chat %s as a reply target (%s); sending without the reply",
                        reply_to, chat_id, exc.message)
        return await send(None)

    async def _formatted(self, call: _TextCall[T], markdown: str) -> T:
        """Send `markdown` as HTML; if Telegram cannot parse our markup, resend it as plain text."""
        from .format import html_to_plain, markdown_to_html

        html = markdown_to_html(markdown)
        try:
            return await self._call(lambda: call(html, ParseMode.HTML))
        except BadRequest as exc:
            if "can't parse entities" not in exc.message.lower():
                raise
            log.warning("Telegram could not parse our HTML (%s); resending as plain text", exc.message)
        return await self._call(lambda: call(html_to_plain(html), None))

    async def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Make one API call once a slot is free; a 429 is raised like any error, its wait carried in the result."""
        async with self._slots:
            return await make()

    def _inside_data_dir(self, relative: str) -> Path | None:
        root = self._data_dir
        return resolve_under(root, root / relative)


def retry_seconds(exc: RetryAfter) -> float:
    """How long Telegram asked us to wait, whichever type this PTB version reports it as."""
    value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def retry_after(exc: TelegramError) -> float | None:
    """When a failed call may be tried again: Telegram's own wait for 429, at once for 5xx and network errors."""
    if isinstance(exc, RetryAfter):
        return retry_seconds(exc)
    if isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):  # PTB files 5xx and timeouts here
        return 0.0
    return None


def telegram_chat_id(chat: str) -> int:
    """The numeric Telegram chat id inside a `telegram:<id>` chat key."""
    channel, native = split_chat_key(chat)
    if channel != "telegram":
        raise ValueError(f"not a telegram chat: {chat!r}")
    return _required_int(native, "chat id")


# How Telegram says a reply target cannot be replied to (its wording has changed over the years).
_REPLY_REFUSED = ("message to be replied not found", "reply message not found", "message_id_invalid")


def reply_refused(exc: BadRequest) -> bool:
    """Whether Telegram refused the message a send replies to, rather than the send itself."""
    text = exc.message.lower()
    return any(marker in text for marker in _REPLY_REFUSED)


def _reply(message_id: int) -> dict[str, Any]:
    """The Bot API's ReplyParameters; allow_sending_without_reply: a deleted referent must not lose the answer."""
    return {"message_id": message_id, "allow_sending_without_reply": True}


def _reply_target(value: str | None, chat_id: int) -> int | None:
    """The Telegram message id a send replies to; an id Telegram could never know is dropped, not the message."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        log.warning("not a Telegram message id to reply to in chat %s: %r; sending without the reply", chat_id, value)
        return None


def _required_int(value: str, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"invalid telegram {what}: {value!r}") from None


def _optional_int(value: str | None, what: str) -> int | None:
    return None if value is None or value == "" else _required_int(value, what)


def inline_keyboard(buttons: tuple[tuple[str, str], ...]) -> dict[str, Any] | None:
    """An InlineKeyboardMarkup with one button per row, or None for no buttons."""
    if not buttons:
        return None
    return {"inline_keyboard": [[{"text": label, "callback_data": data}] for label, data in buttons]}
