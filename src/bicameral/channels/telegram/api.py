"""Bot API calls with plain JSON parameters, answered as raw JSON: building PTB's objects costs more than reading one id."""

from __future__ import annotations

from typing import Any

from telegram import Bot
from telegram.error import EndPointNotFound, InvalidToken, TelegramError


async def call(bot: Bot, method: str, params: dict[str, Any]) -> object:
    """Call the Bot API `method` and return its raw result; None parameters are left out, errors are PTB's."""
    try:
        # Bot API method names are case-insensitive; the lower-case name keeps PTB from warning that a
        # typed method exists.
        return await bot.do_api_request(method.lower(), api_kwargs=params)
    except (EndPointNotFound, InvalidToken) as exc:
        # do_api_request rewords a refused token (401, 404) as an unknown method. Ours all exist, so the
        # original error stands, as the typed methods would have raised it.
        if isinstance(exc.__cause__, InvalidToken):
            raise exc.__cause__ from None
        raise


async def send(bot: Bot, method: str, params: dict[str, Any]) -> int:
    """Call a method that answers with the Message it sent, and return that message's id."""
    answer = await call(bot, method, params)
    message_id = answer.get("message_id") if isinstance(answer, dict) else None
    # Python counts a bool as an int; JSON does not.
    if not isinstance(message_id, int) or isinstance(message_id, bool):
        raise TelegramError(f"{method} answered without a message id")
    return message_id
