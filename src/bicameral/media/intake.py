"""`MediaIntake`: each unread attachment of a batch read by the reader for its kind, the result kept with the message."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from bicameral.events import Attachment, AttachmentKind, Inbound
from bicameral.failures import failure_detail, failure_sentence

log = logging.getLogger(__name__)


class AttachmentReader(Protocol):
    """Reads one saved file of one kind; returns it with `text` or `note` set, and never raises for a bad file."""

    async def read(self, attachment: Attachment, *, data_dir: Path, chat: str) -> Attachment: ...


class MediaIntake:
    """Reads a batch's files before a turn; every reader is loaded (and imports its libraries) on its first file."""

    def __init__(
        self,
        readers: Mapping[AttachmentKind, AttachmentReader],
        *,
        data_dir: Path,
        keep: Callable[[Inbound], None] | None = None,
    ) -> None:
        self._readers = dict(readers)
        self._data_dir = data_dir
        # Stores the message with what was read (a restart, history and later turns need not read it again).
        self._keep = keep

    def unread(self, inbound: Inbound) -> bool:
        """Whether reading this message's files is still to do."""
        return any(not a.read and a.kind in self._readers for a in inbound.attachments)

    async def read_batch(self, batch: Sequence[Inbound]) -> list[Inbound]:
        """The batch with every file read; a message is rewritten in the store only when something changed."""
        return [await self._read_one(inbound) if self.unread(inbound) else inbound for inbound in batch]

    async def aclose(self) -> None:
        """Stop what the readers keep running between files (a warm model's process), at shutdown."""
        for reader in self._readers.values():
            close = getattr(reader, "aclose", None)
            if close is not None:
                await close()

    async def _read_one(self, inbound: Inbound) -> Inbound:
        read = tuple([await self._read(a, inbound.chat) for a in inbound.attachments])
        heard = [a.text for a in read if a.kind == "voice" and a.text]
        # A transcript is the sender's own words: the model reads it as the message, the history finds it.
        text = "\n".join(part for part in (inbound.text, *heard) if part)
        done = dataclasses.replace(inbound, attachments=read, text=text)
        if self._keep is not None:
            self._keep(done)
        return done

    async def _read(self, attachment: Attachment, chat: str) -> Attachment:
        reader = self._readers.get(attachment.kind)
        if attachment.read or reader is None:
            return attachment
        try:
            return await reader.read(attachment, data_dir=self._data_dir, chat=chat)
        except Exception as exc:  # a reader's bug costs this file its text, never the message
            log.error("reading %s failed: %s", attachment.path, failure_detail(exc))
            return dataclasses.replace(attachment, note=failure_sentence("unreadable_file"))
