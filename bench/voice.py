"""Offline transcription speed: a 10 s spoken voice note (espeak-ng, Ogg/Opus) written down by the warm child."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import wave
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.report import Figure
from bicameral.media.whisper_local import OfflineWhisper, offline_why_off

# About 10 s at espeak-ng's default 175 words a minute.
SPEECH = (
    "Good morning. Please remind me to call the garage about the car at ten, then book a table for four "
    "at the Italian place on Friday evening, and add milk, eggs and bread to the shopping list."
)
WARM_RUNS = 3


@dataclass
class VoiceResult:
    """How long the note lasts, the first (cold: process start and model load) and the warm transcriptions."""

    audio_seconds: float
    cold_seconds: float
    warm_seconds: list[float]
    child_rss_mib: float
    words: int

    def figures(self) -> list[Figure]:
        name = "voice"
        warm = min(self.warm_seconds)
        return [
            Figure(name, f"offline transcription, first {self.audio_seconds:.1f} s note", self.cold_seconds, "s",
                   "child start + tiny.en int8 load + transcription (faster-whisper, greedy)"),
            Figure(name, f"offline transcription, warm {self.audio_seconds:.1f} s note", warm, "s",
                   f"best of {len(self.warm_seconds)}: " + ", ".join(f"{s:.2f}" for s in self.warm_seconds)
                   + f" s; {self.words} words heard"),
            Figure(name, "offline transcription, faster than real time", self.audio_seconds / warm, "x",
                   "audio length / warm transcription time"),
            Figure(name, "transcription child RSS", self.child_rss_mib, "MiB", "after the warm runs; freed when idle"),
        ]


async def run_voice() -> VoiceResult | None:
    """Speak SPEECH into a voice note and have the offline model transcribe it; None where that cannot run here."""
    espeak = shutil.which("espeak-ng")
    if espeak is None or offline_why_off() is not None:
        return None
    with tempfile.TemporaryDirectory(prefix="bench-voice-") as tmp:
        note, audio_seconds = _spoken_note(espeak, Path(tmp))
        whisper = OfflineWhisper(idle_seconds=60)
        try:
            started = time.monotonic()
            text = await whisper.transcribe(note)
            cold = time.monotonic() - started
            warm = []
            for _ in range(WARM_RUNS):
                started = time.monotonic()
                text = await whisper.transcribe(note)
                warm.append(time.monotonic() - started)
            rss = _child_rss(whisper)
        finally:
            await whisper.aclose()
    return VoiceResult(audio_seconds, cold, warm, rss, len(text.split()))


def _spoken_note(espeak: str, folder: Path) -> tuple[Path, float]:
    """SPEECH as a Telegram-like voice note (Opus in Ogg, 48 kHz mono) and its length in seconds."""
    import av  # comes with faster-whisper

    wav, note = folder / "note.wav", folder / "note.ogg"
    subprocess.run([espeak, "-w", str(wav), SPEECH], check=True, capture_output=True, timeout=60)
    with wave.open(str(wav)) as reader:
        seconds = reader.getnframes() / reader.getframerate()
    with av.open(str(wav)) as source, av.open(str(note), "w", format="ogg") as sink:
        stream = sink.add_stream("libopus", rate=48000, layout="mono")
        resampler = av.AudioResampler(format="s16", layout="mono", rate=48000)
        for frame in [*source.decode(audio=0), None]:
            for chunk in resampler.resample(frame):
                sink.mux(stream.encode(chunk))
        sink.mux(stream.encode(None))
    return note, seconds


def _child_rss(whisper: OfflineWhisper) -> float:
    pid = whisper.pid
    return psutil.Process(pid).memory_info().rss / 2**20 if pid is not None else 0.0
