"""The system prompt templates shipped with the package."""

from __future__ import annotations

from importlib import resources


def load(name: str) -> str:
    """The text of the prompt file `name` (e.g. "front.md")."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
