"""Render LLM-written Markdown as the HTML subset Telegram accepts; html_to_plain for a rejected message's resend."""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.tree import SyntaxTreeNode

from bicameral.markup import escape


@functools.lru_cache(maxsize=16)
def markdown_to_html(md: str) -> str:
    """Render Markdown into the HTML subset Telegram accepts with parse_mode=HTML."""
    # Cached: the splitter (split.py) renders a chunk to measure it, and the sender renders that same chunk again.
    return _plain_paragraphs(md) if not _MARKUP_RE.search(md) else _parsed(md)


def _parsed(md: str) -> str:
    """The HTML for `md` by way of the Markdown parser."""
    root = SyntaxTreeNode(markdown_parser().parse(md))
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
def markdown_parser() -> MarkdownIt:
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
