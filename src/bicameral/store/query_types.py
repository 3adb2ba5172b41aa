"""What the owner's read-only SQL answers on either engine: the result, the refusal, a value as shown."""

from __future__ import annotations

from dataclasses import dataclass


class QueryRefused(ValueError):
    """A query that is not one plain read; the message says why."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[object, ...]]
    more: bool  # rows were cut at the cap


def cell(value: object, max_text: int) -> object:
    """A value as the result shows it: bytes by their size, text cut to `max_text` characters."""
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > max_text:
        return value[:max_text] + "…"
    return value
