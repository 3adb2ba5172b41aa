"""Escaping for the XML-like envelopes in prompts (as xml.sax.saxutils does, without it dragging in urllib.request)."""

from __future__ import annotations


def escape(text: str) -> str:
    """`text` safe between tags: &, < and > escaped."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(value: str) -> str:
    """`value` as a quoted attribute value, quotes included; whitespace that would be normalised away kept."""
    escaped = escape(value).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in escaped:
        return f'"{escaped}"'
    if "'" not in escaped:
        return f"'{escaped}'"
    return '"' + escaped.replace('"', "&quot;") + '"'
