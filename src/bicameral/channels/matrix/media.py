"""Saving files sent in Matrix rooms (mxc:// content) under the data dir, like Telegram's, within a size limit."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from nio import AsyncClient, DiskDownloadResponse

from bicameral.events import Attachment, AttachmentRef, Inbound, split_chat_key
from bicameral.folders import resolve_under, safe_name

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # as for Telegram: what the readers downstream are sized for


class MatrixMedia:
    """Downloads attachments into `attachments_dir/<room>/<event id>-<safe name>`."""

    def __init__(self, client: AsyncClient, *, data_dir: Path, attachments_dir: Path, redact: Callable[[str], str]) -> None:
        self._client = client
        self._data_dir = data_dir
        self._attachments_dir = attachments_dir
        self._redact = redact

    async def fetch_all(self, inbound: Inbound) -> Inbound:
        """`inbound` with its files saved as attachments, or named by a marker in its text."""
        if not inbound.attachment_refs:
            return inbound
        room = split_chat_key(inbound.chat)[1]
        saved: list[Attachment] = []
        markers: list[str] = []
        for ref in inbound.attachment_refs:
            fetched = await self.fetch(ref, room, inbound.message_id)
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

    async def fetch(self, ref: AttachmentRef, room: str, message_id: str) -> Attachment | str:
        name = safe_name(ref.name)
        if ref.size > MAX_DOWNLOAD_BYTES:
            return f"[attachment too large: {name}]"
        dest = self._attachments_dir / safe_name(room) / f"{safe_name(message_id)}-{name}"
        if resolve_under(self._attachments_dir, dest) is None:
            return f"[attachment unavailable: {name}]"
        partial = dest.with_name(dest.name + ".part")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            # Downloaded beside the target and renamed: a broken transfer never leaves half a file.
            answer = await self._client.download(mxc=ref.file_id, save_to=partial)
            if not isinstance(answer, DiskDownloadResponse):
                raise OSError(getattr(answer, "message", type(answer).__name__))
            if partial.stat().st_size > MAX_DOWNLOAD_BYTES:
                return f"[attachment too large: {name}]"
            partial.replace(dest)
        except Exception as exc:
            log.warning("attachment %s unavailable: %s", name, self._redact(f"{type(exc).__name__}: {exc}"))
            return f"[attachment unavailable: {name}]"
        finally:
            partial.unlink(missing_ok=True)
        return Attachment(kind=ref.kind, path=dest.relative_to(self._data_dir).as_posix(), mime=ref.mime, name=name,
                          size=dest.stat().st_size)
