"""The learnings file: mistakes and corrections, appended as dated entries; `[pending]` ones await review."""

from __future__ import annotations

import threading
from pathlib import Path

_HEADER = (
    "# Learnings\n\n"
    "Corrections and mistakes, one entry each. `[pending]` marks a proposed rule awaiting review; review turns it\n"
    "into `[promoted]`, `[discarded]` or `[refined]`. The `by` line says whose words led to it.\n"
)
AUTHOR_PREFIX = "(by "


class Learnings:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, entry: str) -> None:
        """Add an entry at the end; nothing already in the file (a person's edits included) is rewritten."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write((_HEADER if fresh else "") + "\n" + entry.strip() + "\n")

    def pending(self) -> list[str]:
        """Headings of entries still marked [pending]."""
        return [line[3:].strip() for line in self._lines() if line.startswith("## ") and "[pending]" in line]

    def written_by(self, person: str, day: str) -> int:
        """How many of `day`'s entries (YYYY-MM-DD) name `person` on their `by` line."""
        count, today = 0, False
        for line in self._lines():
            if line.startswith("## "):
                today = line[3:].startswith(day)
            elif today and line.startswith(AUTHOR_PREFIX) and person in line[len(AUTHOR_PREFIX) :].split(";", 1)[0].split():
                count += 1
        return count

    def _lines(self) -> list[str]:
        if not self.path.exists():
            return []
        return self.path.read_text(encoding="utf-8", errors="replace").splitlines()
