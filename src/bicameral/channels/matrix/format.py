"""Render LLM-written Markdown as the HTML Matrix clients show (`format: org.matrix.custom.html`)."""

from __future__ import annotations

import functools

from markdown_it import MarkdownIt

MATRIX_HTML = "org.matrix.custom.html"


@functools.lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Raw HTML in the Markdown is escaped, never passed through: a model quoting a page must not inject markup.
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(["table", "strikethrough"])


def markdown_to_matrix_html(md: str) -> str:
    """The HTML body for `md`; the plain `body` beside it is the Markdown itself."""
    rendered = str(_parser().render(md)).strip()
    # One paragraph needs no <p>: clients show it as the line it is.
    if rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<p>") == 1:
        rendered = rendered[3:-4]
    return rendered


def text_content(md: str, msgtype: str = "m.text") -> dict[str, object]:
    """A message's content: the Markdown as `body`, its HTML as `formatted_body`."""
    return {"msgtype": msgtype, "body": md, "format": MATRIX_HTML, "formatted_body": markdown_to_matrix_html(md)}
