"""Readable text of a fetched page: Markdown from HTML (trafilatura), the text of a PDF (pypdf), plain text as is."""

from __future__ import annotations

import io

from bicameral.web.fetch import FetchFailed, Page

_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset({"application/json", "application/xml", "application/javascript"})
_MAX_PDF_PAGES = 200


def readable_text(page: Page) -> str:
    """The page's text; FetchFailed when its kind is unsupported or nothing readable is in it."""
    kind = page.content_type or _sniff(page.body)
    if kind in _HTML:
        import trafilatura  # loaded on the first page read, not at start: it is large

        text = trafilatura.extract(page.body, output_format="markdown", include_comments=False) or ""
    elif kind == "application/pdf":
        text = _pdf_text(page)
    elif kind.startswith("text/") or kind in _TEXT:
        text = page.body.decode(page.charset or "utf-8", errors="replace")
    else:
        raise FetchFailed(f"{page.url} is {kind}, which web_fetch cannot read (it reads HTML, PDF and text)")
    if not text.strip():
        raise FetchFailed(f"{page.url} has no readable text")
    return text.strip()


def _pdf_text(page: Page) -> str:
    from pypdf import PdfReader  # loaded on the first PDF, not at start
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(page.body))
        pages = reader.pages[:_MAX_PDF_PAGES]
        return "\n\n".join(p.extract_text() or "" for p in pages)
    except (PyPdfError, ValueError, KeyError, TypeError, OSError):
        raise FetchFailed(f"{page.url} is a PDF that could not be read") from None


def _sniff(body: bytes) -> str:
    """A content type for a response that declared none."""
    head = body[:512].lstrip().lower()
    if head.startswith(b"%pdf"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    return "application/octet-stream"
