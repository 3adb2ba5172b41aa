"""Saving Telegram photos and documents under the data dir, safely and within size limits."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from telegram import Bot

from bicameral.config import Settings
from bicameral.events import Attachment

log = logging.getLogger(__name__)

# The Bot API refuses getFile above 20 MB, so larger files cannot be fetched at all.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
MAX_NAME_CHARS = 80

# A fetch yields the saved Attachment, or a marker string to put in the message text instead.
Fetched = Attachment | str
Fetcher = Callable[["MediaRef"], Awaitable[Fetched]]


@dataclass(frozen=True)
class MediaRef:
    """A file attached to a message, not yet downloaded."""

    kind: Literal["photo", "document"]
    file_id: str
    name: str
    chat_native_id: str
    message_id: str
    mime: str | None = None
    size: int = 0


class AttachmentStore:
    """Downloads attachments into `attachments_dir/<chat>/<message_id>-<safe name>`."""

    def __init__(self, bot: Bot, settings: Settings, *, redact: Callable[[str], str] = str) -> None:
        self._bot = bot
        self._settings = settings
        self._redact = redact

    async def fetch(self, ref: MediaRef) -> Fetched:
        """Save one file; oversize or failed downloads become a text marker, never an error."""
        name = safe_name(ref.name)
        if ref.size > MAX_DOWNLOAD_BYTES:
            return too_large_marker(name)
        try:
            file = await self._bot.get_file(ref.file_id)
            if (file.file_size or 0) > MAX_DOWNLOAD_BYTES:
                return too_large_marker(name)
            if not file.file_path:
                return unavailable_marker(name)
            dest = self.destination(ref)
            dest.parent.mkdir(parents=True, exist_ok=True)
            # Download beside the target and rename, so a broken transfer never leaves a half file.
            partial = dest.with_name(dest.name + ".part")
            try:
                await file.download_to_drive(partial)
                partial.replace(dest)
            finally:
                partial.unlink(missing_ok=True)
        except Exception as exc:
            log.warning("attachment %s unavailable: %s", name, self._redact(f"{type(exc).__name__}: {exc}"))
            return unavailable_marker(name)
        return Attachment(
            kind=ref.kind,
            path=dest.relative_to(self._settings.data_dir).as_posix(),
            mime=ref.mime,
            name=name,
            size=dest.stat().st_size,
        )
    def destination(self, ref: MediaRef) -> Path:
        """Where `ref` is saved; always inside attachments_dir, whatever the names contain."""
        root = self._settings.attachments_dir
        dest = root / safe_name(ref.chat_native_id) / f"{safe_name(ref.message_id)}-{safe_name(ref.name)}"
        # Belt and braces: safe_name already forbids separators and dot-only names.
        if not dest.resolve().is_relative_to(root.resolve()):
            raise ValueError(f"attachment path escapes attachments dir: {dest}")
        return dest


def safe_name(name: str) -> str:
    """Basename only, `[A-Za-z0-9._-]` only, at most 80 chars, no leading dots; never empty."""
    base = re.split(r"[\\/]", name)[-1]
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", base).lstrip(".")
    if len(cleaned) > MAX_NAME_CHARS:
        stem, dot, ext = cleaned.rpartition(".")
        # Keep a short extension so the truncated file still opens with the right program.
        if dot and stem and len(ext) <= 10:
            cleaned = stem[: MAX_NAME_CHARS - len(ext) - 1] + "." + ext
        else:
            cleaned = cleaned[:MAX_NAME_CHARS]
    return cleaned or "file"


def too_large_marker(name: str) -> str:
    """The text that stands in for a file above the download limit."""
    return f"[attachment too large: {name}]"


def unavailable_marker(name: str) -> str:
    """The text that stands in for a file that could not be downloaded."""
    return f"[attachment unavailable: {name}]"
