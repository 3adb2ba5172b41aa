"""Saving Telegram photos and documents under the data dir, safely and within size limits."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from telegram import Bot

from bicameral.events import Attachment, AttachmentRef, Inbound, split_chat_key
from bicameral.folders import resolve_under, safe_name

log = logging.getLogger(__name__)

# The Bot API refuses getFile above 20 MB, so larger files cannot be fetched at all.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024

# A fetch yields the saved Attachment, or a marker string to put in the message text instead.
Fetched = Attachment | str


class AttachmentStore:
    """Downloads attachments into `attachments_dir/<chat>/<message_id>-<safe name>`."""

    def __init__(
        self, bot: Bot, *, data_dir: Path, attachments_dir: Path, redact: Callable[[str], str] = str
    ) -> None:
        self._bot = bot
        self._data_dir = data_dir  # an attachment's path is kept relative to it
        self._attachments_dir = attachments_dir
        self._redact = redact

    async def fetch_all(self, inbound: Inbound) -> Inbound:
        """`inbound` with its referenced files saved as attachments, or named by a marker in its text."""
        if not inbound.attachment_refs:
            return inbound
        chat = split_chat_key(inbound.chat)[1]
        saved: list[Attachment] = []
        markers: list[str] = []
        for ref in inbound.attachment_refs:
            fetched = await self.fetch(ref, chat, inbound.message_id)
            if isinstance(fetched, str):
                markers.append(fetched)
            else:
                saved.append(fetched)
        return dataclasses.replace(
            inbound,
            text="\n".join(part for part in (inbound.text, *markers) if part),
            attachments=inbound.attachments + tuple(saved),
            attachment_refs=(),
        )

    async def fetch(self, ref: AttachmentRef, chat: str, message_id: str) -> Fetched:
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
            dest = self.destination(chat, message_id, ref.name)
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
            path=dest.relative_to(self._data_dir).as_posix(),
            mime=ref.mime,
            name=name,
            size=dest.stat().st_size,
        )
    def destination(self, chat: str, message_id: str, name: str) -> Path:
        """Where a file is saved; always inside attachments_dir, whatever the names contain."""
        root = self._attachments_dir
        dest = root / safe_name(chat) / f"{safe_name(message_id)}-{safe_name(name)}"
        # Belt and braces: safe_name already forbids separators and dot-only names.
        if resolve_under(root, dest) is None:
            raise ValueError(f"attachment path escapes attachments dir: {dest}")
        return dest


def too_large_marker(name: str) -> str:
    """The text that stands in for a file above the download limit."""
    return f"[attachment too large: {name}]"


def unavailable_marker(name: str) -> str:
    """The text that stands in for a file that could not be downloaded."""
    return f"[attachment unavailable: {name}]"
