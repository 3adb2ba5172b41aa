"""Telegram channel: long polling in, Bot API actions out."""

from bicameral.imports import import_without

# python-telegram-bot loads `cryptography` (~7 MB) for Telegram Passport whenever it is installed (another
# package's dependency here); the assistant never decrypts Passport data.
import_without("telegram", absent=("cryptography",))

from .channel import TelegramChannel, TelegramConfig  # noqa: E402

__all__ = ["TelegramChannel", "TelegramConfig"]
