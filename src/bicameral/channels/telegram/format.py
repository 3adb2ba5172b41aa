"""Render LLM-written Markdown as Telegram HTML and split long replies into sendable chunks."""

from __future__ import annotations

import bisect
import functools
import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.tree import SyntaxTreeNode

from bicameral.markup import escape

TELEGRAM_LIMIT = 4096
"""Telegram's maximum message length."""


@functools.lru_cache(maxsize=16)
def markdown_to_html(md: str) -> str:
    """Render Markdown into the HTML subset Telegram accepts with parse_mode=HTML."""
    # Cached: the splitter renders a chunk to measure it, and the sender renders that same chunk again.
    return _plain_paragraphs(md) if not _MARKUP_RE.search(md) else _parsed(md)


def _parsed(md: str) -> str:
    """The HTML for `md` by way of the Markdown parser."""
    root = SyntaxTreeNode(_parser().parse(md))
    rendered = _Renderer().blocks(root.children, "\n\n", 0).strip()
    if not rendered.strip() and md.strip():
        # Content that renders to nothing (e.g. a lone link definition) would be an
        # empty message, which Telegram rejects; show the source instead.
        return escape(md.strip())
    return rendered


# Anything that can make Markdown of prose: inline markup anywhere (emphasis, code, links, entities,
# autolinks, tables, escapes), block markup at a line's start (lists, headings, quotes, rules, setext
# underlines, code blocks), hard breaks, and whitespace other than spaces and line feeds. Text without
# any of it is paragraphs of plain text, rendered without the parser.
_MARKUP_RE = re.compile(r"[\\`*_~\[\]<&|\x00]|[^\S \n]|^ *(?:[-+#>=]|\d+[.)])| {4}|  $", re.MULTILINE)


def _plain_paragraphs(md: str) -> str:
    """What the parser makes of plain text: paragraphs split at blank lines, each line's edge spaces dropped."""
    paragraphs, lines = [], []
    for line in md.split("\n"):
        line = line.strip(" ")
        if line:
            lines.append(escape(line))
        elif lines:
            paragraphs.append("\n".join(lines))
            lines = []
    if lines:
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


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


def html_to_plain(html_text: str) -> str:
    """Strip tags and unescape entities, for resending a rejected message as plain text."""
    return html.unescape(_TAG_RE.sub("", html_text))


# --- rendering -----------------------------------------------------------------------

_TAG_RE = re.compile(r"<[^<>]*>")
_SAFE_SCHEMES = frozenset({"http", "https", "mailto", "tg"})
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LANG_STRIP_RE = re.compile(r"[^A-Za-z0-9_+#.-]")
_FORMAT_TAGS = {"strong": "b", "em": "i", "s": "s", "spoiler": "tg-spoiler"}
_BULLET = "• "
_RULE = "———"
# Stock markdown-it terminators plus "|" so the spoiler rule gets a chance to see "||".
_TEXT_STOP_RE = re.compile(r"[\n!#$%&*+\-:<=>@\[\\\]^_`{}~|]")


@functools.cache
def _parser() -> MarkdownIt:
    """Build the shared parser: CommonMark with tables, strikethrough and ||spoilers||, no raw HTML."""
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    # Accept every link at parse time; the renderer vets schemes so unsafe links degrade
    # to their label instead of leaking "[x](javascript:...)" source text.
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    md.inline.ruler.at("text", _text_rule)
    md.inline.ruler.before("emphasis", "tg_spoiler", _spoiler_rule)
    return md


def _text_rule(state: StateInline, silent: bool) -> bool:
    """Consume plain text up to the next character some inline rule may care about."""
    start = state.pos
    match = _TEXT_STOP_RE.search(state.src, start, state.posMax)
    end = match.start() if match else state.posMax
    if end == start:
        return False
    if not silent:
        _append_pending(state, state.src[start:end])
    state.pos = end
    return True


def _append_pending(state: StateInline, text: str) -> None:
    """Append to the pending text buffer without quadratic string copies where supported."""
    append = getattr(state, "append_pending", None)
    if append is not None:
        append(text)
    else:
        state.pending += text


def _spoiler_rule(state: StateInline, silent: bool) -> bool:
    """Parse ||hidden text|| into spoiler_open/spoiler_close tokens."""
    start = state.pos
    if not state.src.startswith("||", start):
        return False
    end = state.src.find("||", start + 2, state.posMax)
    if end < 0 or not state.src[start + 2 : end].strip():
        return False
    if not silent:
        state.push("spoiler_open", "tg-spoiler", 1)
        old_max = state.posMax
        state.pos, state.posMax = start + 2, end
        state.md.inline.tokenize(state)
        state.posMax = old_max
        state.push("spoiler_close", "tg-spoiler", -1)
    state.pos = end + 2
    return True


class _Renderer:
    """Turns a markdown-it syntax tree into Telegram HTML; recursion keeps tags balanced."""

    def __init__(self) -> None:
        self.quote_depth = 0

    def blocks(self, nodes: Sequence[SyntaxTreeNode], sep: str, depth: int) -> str:
        parts = (self.block(node, depth) for node in nodes)
        return sep.join(part for part in parts if part.strip())

    def block(self, node: SyntaxTreeNode, depth: int) -> str:
        kind = node.type
        if kind == "paragraph":
            return self.inline(_inline_children(node), frozenset())
        if kind == "heading":
            return _wrap("b", self.inline(_inline_children(node), frozenset({"b"})))
        if kind in ("bullet_list", "ordered_list"):
            return self.list(node, depth)
        if kind == "blockquote":
            return self.blockquote(node, depth)
        if kind in ("fence", "code_block"):
            return _code_block(node.content, node.info if kind == "fence" else "")
        if kind == "hr":
            return _RULE
        if kind == "table":
            return _table(node)
        if node.children:
            return self.blocks(node.children, "\n", depth)
        return escape(node.content)

    def list(self, node: SyntaxTreeNode, depth: int) -> str:
        start = _int_attr(node.attrGet("start"), 1) if node.type == "ordered_list" else 1
        lines = []
        for index, item in enumerate(node.children):
            marker = f"{start + index}. " if node.type == "ordered_list" else _BULLET
            lines.append("  " * depth + marker + self.blocks(item.children, "\n", depth + 1))
        return "\n".join(lines)

    def blockquote(self, node: SyntaxTreeNode, depth: int) -> str:
        # Telegram forbids nested blockquotes, so inner quotes merge into the outer one.
        self.quote_depth += 1
        try:
            inner = self.blocks(node.children, "\n\n", depth)
        finally:
            self.quote_depth -= 1
        return inner if self.quote_depth else _wrap("blockquote", inner)

    def inline(self, nodes: Sequence[SyntaxTreeNode], active: frozenset[str]) -> str:
        return "".join(self.inline_node(node, active) for node in nodes)

    def inline_node(self, node: SyntaxTreeNode, active: frozenset[str]) -> str:
        kind = node.type
        if kind in ("text", "text_special", "html_inline"):
            return escape(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            # Telegram lets links contain only bold/italic-like entities, not code.
            text = escape(node.content)
            return text if "a" in active else _wrap("code", text)
        if kind in _FORMAT_TAGS:
            tag = _FORMAT_TAGS[kind]
            inner = self.inline(node.children, active | {tag})
            return inner if tag in active else _wrap(tag, inner)
        if kind == "link":
            return self.link(str(node.attrGet("href") or ""), node.children, active)
        if kind == "image":
            alt = _plain(node.children) or node.content
            src = str(node.attrGet("src") or "")
            if "a" in active or not _is_safe_url(src):
                return escape(alt)
            return _anchor(src, escape(alt or src))
        if node.children:
            return self.inline(node.children, active)
        return escape(node.content)

    def link(self, href: str, children: Sequence[SyntaxTreeNode], active: frozenset[str]) -> str:
        if "a" in active or not _is_safe_url(href):
            return self.inline(children, active)
        label = self.inline(children, active | {"a"})
        return _anchor(href, label if label.strip() else escape(href))


def _inline_children(node: SyntaxTreeNode) -> list[SyntaxTreeNode]:
    """Return the inline nodes under a block such as a paragraph, heading or table cell."""
    return [grandchild for child in node.children for grandchild in child.children]


def _code_block(content: str, info: str) -> str:
    """Render a fenced or indented code block as <pre>, tagging a sanitised language."""
    body = content[:-1] if content.endswith("\n") else content
    if not body.strip():
        return ""
    words = info.split(maxsplit=1)
    lang = _LANG_STRIP_RE.sub("", words[0])[:32] if words else ""
    if lang:
        return f'<pre><code class="language-{lang}">{escape(body)}</code></pre>'
    return f"<pre>{escape(body)}</pre>"


def _table(node: SyntaxTreeNode) -> str:
    """Render a table as aligned monospace text, since Telegram has no table markup."""
    rows: list[list[str]] = []
    aligns: list[str] = []
    header_rows = 0
    for section in node.children:
        for table_row in section.children:
            rows.append([" ".join(_plain(_inline_children(cell)).split()) for cell in table_row.children])
            if section.type == "thead":
                header_rows += 1
                aligns = [_cell_align(cell) for cell in table_row.children]
    if not rows:
        return ""
    columns = max(len(row) for row in rows)
    rows = [row + [""] * (columns - len(row)) for row in rows]
    aligns += ["left"] * (columns - len(aligns))
    widths = [max(len(row[col]) for row in rows) for col in range(columns)]
    lines = []
    for index, row in enumerate(rows):
        cells = (_justify(cell, width, align) for cell, width, align in zip(row, widths, aligns, strict=False))
        lines.append(" | ".join(cells).rstrip())
        if index + 1 == header_rows:
            lines.append("-+-".join("-" * width for width in widths))
    return f"<pre>{escape(chr(10).join(lines))}</pre>"


def _cell_align(cell: SyntaxTreeNode) -> str:
    """Read markdown-it's text-align style off a header cell."""
    style = str(cell.attrGet("style") or "")
    for align in ("right", "center"):
        if align in style:
            return align
    return "left"


def _justify(text: str, width: int, align: str) -> str:
    if align == "right":
        return text.rjust(width)
    if align == "center":
        return text.center(width)
    return text.ljust(width)


def _plain(nodes: Sequence[SyntaxTreeNode]) -> str:
    """Flatten inline nodes to unformatted text (for table cells and image alt text)."""
    parts = []
    for node in nodes:
        if node.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif node.children:
            parts.append(_plain(node.children))
        else:
            parts.append(node.content)
    return "".join(parts)


def _is_safe_url(url: str) -> bool:
    """Allow only absolute URLs with schemes Telegram can open and that cannot run script."""
    match = _SCHEME_RE.match(url.strip())
    return match is not None and match.group(1).lower() in _SAFE_SCHEMES


def _anchor(href: str, label_html: str) -> str:
    return f'<a href="{_escape_attr(href)}">{label_html}</a>'


def _wrap(tag: str, inner: str) -> str:
    """Wrap in a tag unless blank, since Telegram rejects or drops empty entities."""
    return f"<{tag}>{inner}</{tag}>" if inner.strip() else inner


def _escape_attr(text: str) -> str:
    # html.escape would emit &#x27;, which is outside the entities Telegram documents.
    return escape(text).replace('"', "&quot;")


def _int_attr(value: object, default: int) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


# --- splitting -----------------------------------------------------------------------

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
        tokens = _parser().parse(text)
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
