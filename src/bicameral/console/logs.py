"""/logs [N]: the last lines of the JSON log (observe/logs.py), read from the file's end, compact and redacted again."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bicameral.console.desk import Asked, OwnerCommand

DEFAULT_LINES = 20
MAX_LINES = 200
LINE_CHARS = 240  # one entry's shown text, the rest cut with "…"
TEXT_CHARS = 12_000  # the whole answer, about three Telegram messages; older lines are left out past it
READ_BYTES = 4 << 20  # at most this much is read from the end of a file
_BLOCK = 64 << 10
_COUNT = re.compile(r"[0-9]{1,9}")
USAGE = f"Usage: /logs [N], N from 1 to {MAX_LINES} (default {DEFAULT_LINES}): the log's last N lines."


@dataclass(frozen=True)
class LogSource:
    """The log file `observe/logs.py` writes (`<logs dir>/bicameral.log`) and the redactor for what leaves it."""

    path: Path
    redact: Callable[[str], str]


def logs_command(source: LogSource) -> OwnerCommand:
    async def logs(asked: Asked) -> str:
        wanted = line_count(asked.argument)
        if wanted is None:
            return USAGE
        count, clamped = wanted
        return await asyncio.to_thread(logs_text, source, count, clamped)

    return OwnerCommand("logs", "/logs [N]", f"the log's last N lines (default {DEFAULT_LINES})", logs)


def line_count(argument: str) -> tuple[int, bool] | None:
    """N from the words after /logs: (N, whether it was lowered to MAX_LINES); None when N is no whole number >= 1."""
    word = argument.strip()
    if not word:
        return DEFAULT_LINES, False
    if _COUNT.fullmatch(word) is None:
        # Digits past nine are not read as a number at all: a screenful of them is still "more than the most".
        return (MAX_LINES, True) if word.isascii() and word.isdigit() else None
    count = int(word)
    if count < 1:
        return None
    return (MAX_LINES, True) if count > MAX_LINES else (count, False)


def logs_text(source: LogSource, count: int, clamped: bool = False) -> str:
    """The answer to /logs: the last `count` lines, compact, redacted, cut to fit."""
    raw = last_lines(source.path, count)
    if not raw:
        where = "is empty" if source.path.exists() else "has not been written yet"
        return f"The log ({source.path.name}) {where}."
    shown: list[str] = []
    day = None
    for line in raw:
        stamp_day, text = compact(line, source.redact)
        if stamp_day is not None and stamp_day != day:
            shown.append(f"-- {stamp_day} --")
            day = stamp_day
        shown.append(text)
    left_out = 0
    while sum(len(line) + 1 for line in shown) > TEXT_CHARS and len(shown) > 1:
        shown.pop(0)
        left_out += 1
    head = f"The log's last {len(raw)} lines (times UTC)"
    if clamped:
        head += f"; {MAX_LINES} is the most I send"
    if left_out:
        head += f"; the {left_out} oldest left out to fit"
    body = "\n".join(shown).replace("```", "'''")  # the fence below must stay the only one
    return f"{head}:\n```\n{body}\n```"


def compact(line: str, redact: Callable[[str], str]) -> tuple[str | None, str]:
    """One JSON log entry as (its UTC day, "HH:MM:SS LEVEL component: message"); other text as it is, redacted."""
    try:
        entry = json.loads(line)
    except ValueError:
        entry = None
    if not isinstance(entry, dict):
        return None, _cut(redact(" ".join(line.split())))
    stamp = str(entry.get("ts", ""))
    day, time_of_day = (stamp[:10], stamp[11:19]) if len(stamp) >= 19 and stamp[10] == "T" else (None, "--:--:--")
    message = " ".join(str(entry.get("msg", "")).split())
    exc = str(entry.get("exc") or "").strip()
    if exc:
        message += f" [{exc.splitlines()[-1]}]"  # the exception's own line; the traceback stays in the file
    text = f"{time_of_day} {str(entry.get('level', '?'))[:5]} {entry.get('component', '?')}: {message}"
    return day, _cut(redact(text))


def _cut(text: str) -> str:
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


def last_lines(path: Path, count: int) -> list[str]:
    """The last `count` non-empty lines of the log, from the day before's file too when today's holds fewer."""
    lines = _tail(path, count)
    if len(lines) < count:
        rotated = sorted(path.parent.glob(f"{path.name}.*"))  # TimedRotatingFileHandler: bicameral.log.2024-05-01
        if rotated:
            lines = _tail(rotated[-1], count - len(lines)) + lines
    return lines


def _tail(path: Path, count: int, max_bytes: int = READ_BYTES) -> list[str]:
    """The last `count` non-empty lines of a file, read backwards in blocks: never more than `max_bytes` of it."""
    try:
        with path.open("rb") as file:
            end = pos = file.seek(0, os.SEEK_END)
            blocks: list[bytes] = []
            newlines = 0
            while pos > 0 and newlines <= count and end - pos < max_bytes:
                step = min(_BLOCK, pos, max_bytes - (end - pos))
                pos -= step
                file.seek(pos)
                block = file.read(step)
                blocks.append(block)
                newlines += block.count(b"\n")
    except OSError:
        return []
    lines = b"".join(reversed(blocks)).split(b"\n")
    if pos > 0:
        lines = lines[1:]  # begins part-way through a line
    kept = [line for line in lines if line.strip()]
    return [line.decode("utf-8", "replace") for line in kept[-count:]]
