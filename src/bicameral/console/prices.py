"""What a model's tokens cost: a small built-in table of list prices, overridden by the owner's prices file."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# The local models run on this machine: no bill.
FREE_PROVIDERS = ("local",)
# A dated snapshot or an alias costs what its model costs: claude-sonnet-4-5-20250929, gpt-4o-2024-08-06, ...-latest.
_VERSION_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens: input, output, and cache reads and writes (charged as input when not given)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        total = input_tokens * self.input + output_tokens * self.output + cache_read_tokens * read
        return (total + cache_write_tokens * write) / 1_000_000


FREE = Price(0.0, 0.0, 0.0, 0.0)

# List prices in USD per million tokens, as the vendors publish them (Anthropic: cache writes of 5 minutes; OpenAI
# charges nothing to write its cache). A model not here has no price until the owner's file gives it one.
BUILT_IN: dict[str, Price] = {
    "anthropic:claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "anthropic:claude-opus-4-1": Price(15.0, 75.0, 1.50, 18.75),
    "anthropic:claude-opus-4-0": Price(15.0, 75.0, 1.50, 18.75),
    "anthropic:claude-sonnet-4-5": Price(3.0, 15.0, 0.30, 3.75),
    "anthropic:claude-sonnet-4-0": Price(3.0, 15.0, 0.30, 3.75),
    "anthropic:claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "anthropic:claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "openai:gpt-4.1": Price(2.0, 8.0, 0.50, 2.0),
    "openai:gpt-4.1-mini": Price(0.40, 1.60, 0.10, 0.40),
    "openai:gpt-4.1-nano": Price(0.10, 0.40, 0.025, 0.10),
    "openai:gpt-4o": Price(2.50, 10.0, 1.25, 2.50),
    "openai:gpt-4o-mini": Price(0.15, 0.60, 0.075, 0.15),
    "openai:gpt-5": Price(1.25, 10.0, 0.125, 1.25),
    "openai:gpt-5-mini": Price(0.25, 2.0, 0.025, 0.25),
    "openai:gpt-5-nano": Price(0.05, 0.40, 0.005, 0.05),
}
# Names the vendors also answer to.
_ALIASES = {
    "anthropic:claude-opus-4": "anthropic:claude-opus-4-0",
    "anthropic:claude-sonnet-4": "anthropic:claude-sonnet-4-0",
}

EXAMPLE = '{"openai:gpt-4o": {"input": 2.5, "output": 10, "cache_read": 1.25}}'


@dataclass(frozen=True)
class Prices:
    """The price of each model known: the owner's file over the built-in table. `problem` says why the file was
    not used, when it exists and could not be read."""

    table: dict[str, Price]
    path: Path
    problem: str | None = None

    @classmethod
    def load(cls, path: Path) -> Prices:
        """The built-in table with the file's prices over it; a file that cannot be read is reported and ignored."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(dict(BUILT_IN), path)
        except (OSError, UnicodeDecodeError) as exc:
            return cls._unreadable(path, f"it cannot be read ({exc.__class__.__name__})")
        try:
            owned = _parse(text)
        except ValueError as exc:
            return cls._unreadable(path, str(exc))
        return cls({**BUILT_IN, **owned}, path)

    @classmethod
    def _unreadable(cls, path: Path, why: str) -> Prices:
        log.warning("the prices file %s was not read: %s", path, why)
        return cls(dict(BUILT_IN), path, problem=f"Your prices file {path} was not read: {why}. These are the built-in prices.")

    def price(self, model: str) -> Price | None:
        """The price of `provider:model`, or None when it is unknown (never a guess). Local models are free."""
        if model.split(":", 1)[0] in FREE_PROVIDERS:
            return self.table.get(model, FREE)
        for name in (model, _VERSION_SUFFIX.sub("", model)):
            name = _ALIASES.get(name, name)
            if name in self.table:
                return self.table[name]
        return None


def _parse(text: str) -> dict[str, Price]:
    """The prices file: {"provider:model": {"input": USD, "output": USD, "cache_read": USD, "cache_write": USD}}."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"it should be one JSON object of models, like {EXAMPLE}")
    prices = {}
    for model, entry in value.items():
        if ":" not in model:
            raise ValueError(f"{model!r} should be written provider:model, e.g. openai:{model}")
        if not isinstance(entry, dict) or not {"input", "output"} <= entry.keys():
            raise ValueError(f"{model} needs at least an input and an output price, like {EXAMPLE}")
        extra = sorted(set(entry) - {"input", "output", "cache_read", "cache_write"})
        if extra:
            raise ValueError(f"{model} has {', '.join(extra)}: only input, output, cache_read and cache_write are read")
        numbers = {}
        for key, amount in entry.items():
            if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 <= amount < 1e6:
                raise ValueError(f"{model}'s {key} price is {amount!r}, not a number of USD per million tokens")
            numbers[key] = float(amount)
        prices[model] = Price(**numbers)
    return prices
