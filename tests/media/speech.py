"""Real speech for the voice tests: espeak-ng says a sentence into a WAV; PyAV encodes it as Telegram's Ogg/Opus."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def spoken_wav(folder: Path, text: str, name: str = "speech.wav") -> Path:
    """`text` read aloud by espeak-ng (scripts/test installs it), as a WAV file in `folder`."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        pytest.skip("espeak-ng is not installed (scripts/test installs it)")
    path = folder / name
    subprocess.run([espeak, "-w", str(path), text], check=True, capture_output=True, timeout=60)
    return path


def ogg_opus(wav: Path, out: Path | None = None) -> Path:
    """The WAV as a voice note: Opus at 48 kHz, mono, in an Ogg container, encoded by PyAV (faster-whisper's decoder)."""
    av = pytest.importorskip("av")
    out = out or wav.with_suffix(".ogg")
    with av.open(str(wav)) as source, av.open(str(out), "w", format="ogg") as sink:
        stream = sink.add_stream("libopus", rate=48000, layout="mono")
        resampler = av.AudioResampler(format="s16", layout="mono", rate=48000)
        for frame in [*source.decode(audio=0), None]:
            for chunk in resampler.resample(frame):
                sink.mux(stream.encode(chunk))
        sink.mux(stream.encode(None))
    return out


def speech_ogg(folder: Path, text: str) -> bytes:
    """`text` spoken, as the bytes of a Telegram voice note."""
    return ogg_opus(spoken_wav(folder, text)).read_bytes()
