"""Wire capture: each session's raw stdout lines and timestamped stderr under `<data>/cc_logs/`, secrets redacted."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from bicameral.redaction import Redactor, scrub_obj

log = logging.getLogger(__name__)

STREAM_SUFFIX = ".stream.jsonl"
STDERR_SUFFIX = ".stderr.log"
META_SUFFIX = ".meta.json"


def capture_dir(data_dir: Path) -> Path:
    return data_dir / "cc_logs"


class WireCapture:
    """Appends one session's wire traffic; files survive respawns of the same session and crashes."""

    def __init__(
        self,
        root: Path,
        session_id: str,
        *,
        secrets: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.session_id = session_id
        self.stream_path = root / f"{session_id}{STREAM_SUFFIX}"
        self.stderr_path = root / f"{session_id}{STDERR_SUFFIX}"
        self.meta_path = root / f"{session_id}{META_SUFFIX}"
        self._redact = Redactor(secrets)
        self._clock = clock
        # Line-buffered appends: a crash of this process loses at most the line being written.
        self._stream = self.stream_path.open("a", encoding="utf-8", buffering=1)
        self._stderr = self.stderr_path.open("a", encoding="utf-8", buffering=1)

    def stdout(self, line: str) -> None:
        """One raw stdout line, as it came (re-serialised only when a credential had to be redacted)."""
        self._write(self._stream, self._redact_json(line.rstrip("\n")))

    def stderr(self, line: str) -> None:
        self._write(self._stderr, f"{self._stamp()} {self._redact(line.rstrip())}")

    def note(self, text: str) -> None:
        """A host-side line in the stderr log (spawns, kills, exits), marked as ours."""
        self._write(self._stderr, f"{self._stamp()} [bicameral] {self._redact(text)}")

    def write_meta(self, *, label: str, pid: int | None) -> None:
        """Which conversation this session belongs to and the live process, for `bicameral trace --list`."""
        meta = {"session_id": self.session_id, "label": label, "pid": pid, "updated": self._clock()}
        try:
            self.meta_path.write_text(json.dumps(meta), encoding="utf-8")
        except OSError as exc:
            log.warning("could not write %s: %s", self.meta_path, exc)

    def close(self) -> None:
        for handle in (self._stream, self._stderr):
            try:
                handle.close()
            except OSError:
                pass

    def _write(self, handle: TextIO, text: str) -> None:
        try:
            handle.write(text + "\n")
        except (OSError, ValueError) as exc:  # a full disk or a closed file must not stop the worker
            log.warning("wire capture for %s failed: %s", self.session_id, exc)

    def _stamp(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="milliseconds")

    def _redact_json(self, line: str) -> str:
        try:
            obj = json.loads(line)
        except ValueError:
            return self._redact(line)  # not JSON: kept for the record, redacted as text
        cleaned = scrub_obj(obj, self._redact)
        return line if cleaned == obj else json.dumps(cleaned, ensure_ascii=False)
