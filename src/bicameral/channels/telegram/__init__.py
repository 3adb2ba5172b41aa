"""Telegram channel: long polling in, Bot API actions out."""

from .channel import TelegramChannel

__all__ = ["TelegramChannel"]
