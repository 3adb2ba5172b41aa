"""A long document's text made to fit a budget page by page: each page's marker and first lines, never a blind cut.

This is an extractive digest, not a summary: no model reads the document, it only keeps the opening lines of every
page, sheet or slide (a fixed share of the budget each) and says where the whole text is, so the model knows what
the document holds and where to read on with the file tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The markers extract_formats writes; text without them (Word, plain text) is cut into blocks of lines instead.
_MARKER = re.compile(r"^--- (page|sheet|slide) (.+) ---$", re.MULTILINE)
_BLOCKS = 20  # how many parts an unmarked text is shown as
_MIN_SHARE = 150  # a part gets at least this much (a marker and a line); past budget / share parts, the rest are counted


@dataclass(frozen=True)
class Part:
    marker: str  # `--- page 3 ---`, or "" for what comes before the first marker
    body: str


def parts(text: str) -> tuple[str, list[Part]]:
    """The text's pages, sheets or slides (by their markers), else blocks of its lines; with the unit's name."""
    found = list(_MARKER.finditer(text))
    if found:
        cut = [Part("", text[: found[0].start()].strip())] if text[: found[0].start()].strip() else []
        for here, after in zip(found, [*found[1:], None], strict=True):
            end = after.start() if after is not None else len(text)
            cut.append(Part(here.group(0), text[here.end() : end].strip("\n")))
        return found[0].group(1), cut
    lines = text.splitlines()
    if len(lines) >= _BLOCKS:
        size = -(-len(lines) // _BLOCKS)
        return "block", [
            Part(f"--- lines {i + 1}-{min(i + size, len(lines))} ---", "\n".join(lines[i : i + size]))
            for i in range(0, len(lines), size)
        ]
    size = -(-len(text) // _BLOCKS)
    return "block", [
        Part(f"--- characters {i + 1}-{min(i + size, len(text))} ---", text[i : i + size]) for i in range(0, len(text), size)
    ]


def digest(text: str, *, budget: int, text_path: str | None) -> str:
    """`text` itself when it fits `budget`; else each part's marker and opening lines, and where the whole text is."""
    if len(text) <= budget:
        return text
    unit, cut = parts(text)
    share = max(budget // max(len(cut), 1), _MIN_SHARE)
    shown = [
        "\n".join(filter(None, (part.marker, opening(part.body, share - len(part.marker) - 1))))
        for part in cut[: max(budget // share, 1)]
    ]
    counted = f"{len(cut)} {unit}s" if unit != "block" else f"{text.count(chr(10)) + 1:,} lines"
    left = f" (the first {len(shown)} of them)" if len(shown) < len(cut) else ""
    where = (
        f"The whole text ({counted}, {len(text):,} characters) is in the workspace at {text_path}: read it there."
        if text_path
        else f"The whole text ({counted}, {len(text):,} characters) could not be saved; this digest is all there is."
    )
    shown.append(f"[An extractive digest, not the whole text: the opening lines of each part{left}. {where}]")
    return "\n".join(shown)


def opening(body: str, chars: int) -> str:
    """The first lines of `body` within `chars`, a line too long cut with `…`; `…` ends it when lines were left out."""
    if len(body) <= chars:
        return body
    kept: list[str] = []
    used = 0
    for line in body.splitlines():
        if used + len(line) + 1 > chars - 2:
            if not kept:
                kept.append(line[: max(chars - 2, 0)])
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept) + " …"
