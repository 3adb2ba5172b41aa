"""Saving a message's files under the data dir, for every channel: safe names, a size limit, never half a file."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from bicameral.events import Attachment, AttachmentRef, Inbound, split_chat_key
from bicameral.folders import resolve_under, safe_name

log = logging.getLogger(__name__)

# The Bot API refuses getFile above 20 MB; the readers downstream are sized for the same on every channel.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024

# Writes the file a reference names at the path given, or raises (TooLarge when the platform says it is).
Download = Callable[[AttachmentRef, Path], Awaitable[None]]


class TooLarge(Exception):
    """The platform says the file is above the download limit."""


class AttachmentSaver:
    """Downloads attachments into `attachments_dir/<chat>/<message_id>-<safe name>` through a channel's `download`."""

    def __init__(
        self, download: Download, *, data_dir: Path, attachments_dir: Path, redact: Callable[[str], str] = str
    ) -> None:
        self._download = download
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

    async def fetch(self, ref: AttachmentRef, chat: str, message_id: str) -> Attachment | str:
        """Save one file; an oversize or failed download becomes a text marker, never an error."""
        name = safe_name(ref.name)
        if ref.size > MAX_DOWNLOAD_BYTES:
            return too_large_marker(name)
        try:
            dest = self.destination(chat, message_id, ref.name)
        except ValueError:
            return unavailable_marker(name)
        # Downloaded beside the target and renamed, so a broken transfer never leaves a half file.
        partial = dest.with_name(dest.name + ".part")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            await self._download(ref, partial)
            if partial.stat().st_size > MAX_DOWNLOAD_BYTES:  # the size declared was not the size sent
                return too_large_marker(name)
            partial.replace(dest)
        except TooLarge:
            return too_large_marker(name)
        except Exception as exc:
            log.warning("attachment %s unavailable: %s", name, self._redact(f"{type(exc).__name__}: {exc}"))
            return unavailable_marker(name)
        finally:
            partial.unlink(missing_ok=True)
        return Attachment(
            kind=ref.kind, path=dest.relative_to(self._data_dir).as_posix(), mime=ref.mime, name=name,
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
