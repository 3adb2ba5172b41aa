"""Split long Markdown replies into chunks whose Telegram HTML stays under 4096 characters, fences and tables reopened."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markdown_it.token import Token

from .format import markdown_parser, markdown_to_html

TELEGRAM_LIMIT = 4096
"""Telegram's maximum message length."""


def split_for_telegram(md: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split Markdown into chunks whose rendered HTML is at most `limit` characters each."""
    if limit < _MIN_LIMIT:
        raise ValueError(f"limit must be at least {_MIN_LIMIT}, got {limit}")
    # markdown-it treats \r\n and lone \r as line ends; normalising first keeps its line
    # numbers aligned with our offsets.
    text = md.replace("\r\n", "\n").replace("\r", "\n")
    if not _NON_SPACE_RE.search(text):
        return []
    whole = _tidy(text)
    # Most replies fit one message: a single render settles that, where the splitter parses and probes.
    if len(whole) <= limit and _rendered_size(whole) <= limit:
        return [whole]
    return _Splitter(text, limit).chunks()


# A single source character renders to at most a handful of characters ("&" -> "&amp;"),
# so this floor guarantees the last-resort hard cut always makes progress.
_MIN_LIMIT = 16
_NON_SPACE_RE = re.compile(r"\S")
_LEADING_BLANK_LINES_RE = re.compile(r"\A(?:[ \t]*\n)+")
_SENTENCE_END_RE = re.compile(r"[.!?…][\"'”’)\]*_]*+\s++")
_WHITESPACE_RE = re.compile(r"\s++")
_LINE_END_RE = re.compile(r"\n")
# Cut-point classes, best first: top-level blocks, nested blocks (list items, table rows),
# lines, sentences, words. Anything else is a hard cut.
_BLOCK, _NESTED, _LINE, _SENTENCE, _WORD = range(5)


@dataclass(frozen=True)
class _Region:
    """A top-level fence or table that is reopened when a chunk boundary falls inside it."""

    start: int
    inner_start: int
    inner_end: int
    end: int
    prefix: str
    closer: str

    def contains(self, pos: int) -> bool:
        return self.inner_start < pos < self.inner_end

    def forbids(self, pos: int) -> bool:
        # Cutting inside the opener/header or the closing fence line would orphan them.
        return self.start < pos <= self.inner_start or self.inner_end <= pos < self.end


class _Splitter:
    """Greedy packer: each chunk ends at the farthest cut of the best class that still fits."""

    def __init__(self, text: str, limit: int) -> None:
        self.text = text
        self.limit = limit
        # Markdown syntax rarely shrinks much when rendered, so looking further ahead than
        # this only costs render time.
        self.window = 4 * limit
        self.growth = 1.0  # rendered characters per source character, as last observed
        self.line_starts = [0] + [m.end() for m in _LINE_END_RE.finditer(text)]
        self.regions: list[_Region] = []
        self.region_starts: list[int] = []
        self.cuts = self._cut_classes()

    def chunks(self) -> list[str]:
        chunks: list[str] = []
        pos = 0
        while _NON_SPACE_RE.search(self.text, pos):
            end, chunk = self._next_chunk(pos)
            if chunk:
                chunks.append(chunk)
            pos = end
        return chunks

    def _next_chunk(self, pos: int) -> tuple[int, str]:
        """Choose where the chunk starting at pos ends; return that end and the chunk text."""
        horizon = min(len(self.text), pos + self.window)
        sizes: dict[int, int] = {}  # cut classes overlap, so the same end is often re-probed

        def size(end: int) -> int:
            if end not in sizes:
                sizes[end] = _rendered_size(self._assemble(pos, end))
            return sizes[end]

        found = None
        for cuts in self.cuts:
            candidates = cuts[bisect.bisect_right(cuts, pos) : bisect.bisect_right(cuts, horizon)]
            found = _farthest(candidates, size, self.limit, pos, self.growth)
            if found is not None:
                break
        else:
            hard = [end for end in range(pos + 1, horizon + 1) if not self._forbidden(end)]
            found = _farthest(hard, size, self.limit, pos, self.growth)
        if found is None:
            # Even one character plus a reopened fence is too long: cut raw, without wrapping.
            raw = range(pos + 1, horizon + 1)
            found = _farthest(
                raw, lambda end: _rendered_size(_tidy(self.text[pos:end])), self.limit, pos, 1.0
            )
            end = found if found is not None else pos + 1
            return end, _tidy(self.text[pos:end])
        if sizes.get(found):
            # The next chunk most likely renders like this one, which makes a good first guess.
            self.growth = min(max(sizes[found] / (found - pos), 0.25), 8.0)
        return found, self._assemble(pos, found)

    def _assemble(self, start: int, end: int) -> str:
        """Source text for [start, end), with fences/table headers reopened or closed as needed."""
        body = self.text[start:end]
        opened = self._region_at(start)
        closed = self._region_at(end)
        if opened is not None:
            body = opened.prefix + body
        if closed is not None and closed.closer:
            body += ("" if body.endswith("\n") else "\n") + closed.closer
        return _tidy(body)

    def _region_at(self, pos: int) -> _Region | None:
        index = bisect.bisect_right(self.region_starts, pos) - 1
        if index >= 0 and self.regions[index].contains(pos):
            return self.regions[index]
        return None

    def _forbidden(self, pos: int) -> bool:
        index = bisect.bisect_left(self.region_starts, pos) - 1
        return index >= 0 and self.regions[index].forbids(pos)

    def _offset(self, line: int) -> int:
        return self.line_starts[line] if line < len(self.line_starts) else len(self.text)

    def _cut_classes(self) -> list[list[int]]:
        """Sorted cut positions per class; each class also includes every better class."""
        text, n = self.text, len(self.text)
        tokens = markdown_parser().parse(text)
        nested_code: list[tuple[int, int]] = []
        all_code: list[tuple[int, int]] = []
        by_class: list[set[int]] = [set() for _ in range(5)]
        for token in tokens:
            if not token.map or token.nesting < 0:
                continue
            first_line, last_line = token.map
            start, end = self._offset(first_line), self._offset(last_line)
            if token.type in ("fence", "code_block"):
                all_code.append((start, end))
                if token.level > 0:
                    nested_code.append((start, end))
            if token.level == 0:
                by_class[_BLOCK].add(start)
                self._add_region(token, first_line, last_line, start, end)
            else:
                by_class[_NESTED].add(start)
        by_class[_LINE].update(self.line_starts)
        by_class[_SENTENCE].update(m.end() for m in _SENTENCE_END_RE.finditer(text))
        by_class[_WORD].update(m.end() for m in _WHITESPACE_RE.finditer(text))
        self.region_starts = [region.start for region in self.regions]
        in_nested = _interior_test(nested_code)
        in_code = _interior_test(all_code)
        result: list[list[int]] = []
        cumulative: set[int] = {n}
        for cls, positions in enumerate(by_class):
            for pos in positions:
                if not 0 < pos < n or self._forbidden(pos):
                    continue
                if _NESTED <= cls <= _SENTENCE and in_nested(pos):
                    continue
                if cls == _SENTENCE and in_code(pos):
                    continue
                cumulative.add(pos)
            result.append(sorted(cumulative))
        return result

    def _add_region(self, token: Token, first: int, last: int, start: int, end: int) -> None:
        """Record a top-level fence or table (source lines [first, last)) so chunks cut inside it stay well-formed."""
        if token.type == "fence" and last - first >= 2:
            closing = self.text[self._offset(last - 1) : end].strip()
            closed = closing.startswith(token.markup) and not closing.strip(token.markup[0])
            inner_end = self._offset(last - 1) if closed else end
            opener = self.text[start : self._offset(first + 1)]
            region = _Region(start, self._offset(first + 1), inner_end, end, opener, token.markup)
        elif token.type == "table_open" and last - first >= 3:
            header_end = self._offset(first + 2)
            region = _Region(start, header_end, end, end, self.text[start:header_end], "")
        else:
            return
        self.regions.append(region)


def _interior_test(spans: list[tuple[int, int]]) -> Callable[[int], bool]:
    """Return a predicate telling whether a position lies strictly inside any of the spans."""
    spans = sorted(spans)
    starts = [start for start, _ in spans]

    def inside(pos: int) -> bool:
        index = bisect.bisect_left(starts, pos) - 1
        return index >= 0 and pos < spans[index][1]

    return inside


def _farthest(
    candidates: Sequence[int], size: Callable[[int], int], limit: int, origin: int, growth: float
) -> int | None:
    """Find the last candidate whose rendered size fits, treating size as growing with it."""
    if not candidates:
        return None
    lo_size = size(candidates[0])
    if lo_size > limit:
        return None
    lo, hi, hi_size = 0, len(candidates), 0  # candidates[lo] fits; from hi on, taken not to
    # The first guess extrapolates from the expected growth when rendered; later guesses
    # interpolate between the bracketing measurements (regula falsi), with a bisection step
    # whenever that fails to halve the interval, so renders stay logarithmic at worst.
    guess = bisect.bisect_right(candidates, origin + int(limit / growth)) - 1
    bisect_next = False
    while hi - lo > 1 and lo_size < limit:
        mid = (lo + hi) // 2 if bisect_next else min(max(guess, lo + 1), hi - 1)
        width = hi - lo
        measured = size(candidates[mid])
        if measured <= limit:
            lo, lo_size = mid, measured
        else:
            hi, hi_size = mid, measured
        bisect_next = not bisect_next and (hi - lo) * 2 > width
        if hi < len(candidates) and hi_size > lo_size:
            step = (candidates[hi] - candidates[lo]) * (limit - lo_size) // (hi_size - lo_size)
            target = candidates[lo] + step
        else:
            target = origin + (candidates[lo] - origin) * limit // max(lo_size, 1)
        guess = bisect.bisect_right(candidates, target) - 1
    return candidates[lo]


def _rendered_size(chunk: str) -> int:
    return len(markdown_to_html(chunk)) if chunk else 0


def _tidy(chunk: str) -> str:
    """Drop leading blank lines and trailing whitespace; keep leading indentation (code)."""
    return _LEADING_BLANK_LINES_RE.sub("", chunk).rstrip()
