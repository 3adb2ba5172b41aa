"""`VoiceReader`: a voice note or audio file written down, by the configured endpoint or the offline model, or a note."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from bicameral.events import Attachment
from bicameral.failures import failure_sentence
from bicameral.media.whisper_local import OfflineFailed, OfflineWhisper
from bicameral.models.transcription import MAX_UPLOAD_BYTES, TranscriptionEndpoint, TranscriptionFailed, transcribe

log = logging.getLogger(__name__)

# How each format begins, and the name the endpoint is sent (its extension names the format).
_MIME = {"ogg": "audio/ogg", "wav": "audio/wav", "mp3": "audio/mpeg", "flac": "audio/flac", "m4a": "audio/mp4",
         "webm": "audio/webm"}


@dataclass(frozen=True)
class VoiceConfig:
    """How voice is heard: an endpoint, else the offline model (when `offline` and installed), else not at all."""

    endpoint: TranscriptionEndpoint | None
    offline: bool
    max_bytes: int = MAX_UPLOAD_BYTES


def audio_format(head: bytes) -> str | None:
    """The container the first bytes of a file announce (ogg, wav, mp3, flac, m4a, webm), or None: not audio."""
    if head.startswith(b"OggS"):
        return "ogg"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"fLaC"):
        return "flac"
    if head[4:8] == b"ftyp":
        return "m4a"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm"
    # MP3: an ID3 tag, or an MPEG audio frame's sync word (11 set bits, a layer that is not "reserved").
    if head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06):
        return "mp3"
    return None


class VoiceReader:
    """Reads a voice attachment into its transcript (`text`) or a sentence saying why there is none (`note`)."""

    def __init__(self, config: VoiceConfig, *, offline: OfflineWhisper | None = None) -> None:
        self.config = config
        # Built when the first note needs it; nothing of the model is imported before.
        self._offline = offline
        self.heard = 0  # notes written down: tests read it

    @property
    def mode(self) -> str:
        """`endpoint`, `offline` or `off`: how a note would be written down now."""
        return "endpoint" if self.config.endpoint is not None else "offline" if self.config.offline else "off"

    async def read(self, attachment: Attachment, *, data_dir: Path, chat: str) -> Attachment:
        path = data_dir / attachment.path
        mode = self.mode
        if mode == "off":
            return self._noted(attachment, "voice_off")
        try:
            size = path.stat().st_size
            with path.open("rb") as file:
                head = file.read(16)
        except OSError as err:
            log.warning("voice %s: %s", attachment.path, err)
            return self._noted(attachment, "unreadable_file")
        if size > self.config.max_bytes:
            return self._noted(attachment, "voice_too_large")
        kind = audio_format(head)
        if kind is None:
            return self._noted(attachment, "voice_not_audio")
        try:
            if mode == "endpoint":
                text = await self._from_endpoint(path, kind)
            else:
                text = await self._from_offline(path)
        except TranscriptionFailed as err:
            log.warning("voice %s in %s: %s", attachment.path, chat, err)
            return self._noted(attachment, "voice_key" if err.kind == "auth" else "voice_failed")
        except OfflineFailed as err:
            log.warning("voice %s in %s: %s", attachment.path, chat, err)
            return self._noted(attachment, "voice_failed")
        if not text:
            return self._noted(attachment, "voice_silent")
        self.heard += 1
        log.info("voice %s in %s: %d characters heard (%s)", attachment.path, chat, len(text), mode)
        return dataclasses.replace(attachment, text=text)

    async def aclose(self) -> None:
        """End the offline model's process, if one runs."""
        if self._offline is not None:
            await self._offline.aclose()

    async def _from_endpoint(self, path: Path, kind: str) -> str:
        assert self.config.endpoint is not None
        audio = await asyncio.to_thread(path.read_bytes)
        return await transcribe(self.config.endpoint, audio, f"voice.{kind}", _MIME[kind])

    async def _from_offline(self, path: Path) -> str:
        if self._offline is None:
            self._offline = OfflineWhisper()
        return await self._offline.transcribe(path)

    @staticmethod
    def _noted(attachment: Attachment, kind: str) -> Attachment:
        return dataclasses.replace(attachment, note=failure_sentence(kind))

