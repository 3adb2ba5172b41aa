"""/usage and /cost: the tokens the models reported and what they cost, per model and per chat, by UTC day or week."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bicameral.console.desk import Asked, OwnerCommand
from bicameral.console.prices import FREE_PROVIDERS, Prices
from bicameral.store.usage import UsageTotal
from bicameral.types import Clock

NO_CHAT = "(no chat)"


@dataclass(frozen=True)
class UsageSources:
    """What /usage and /cost read: the usage record added up since a time, and the prices file."""

    totals: Callable[[float], list[UsageTotal]]  # grouped by model, role and chat
    prices_path: Path
    clock: Clock = time.time
    note: str | None = None  # what the record leaves out, said under each answer
    caps: Callable[[], str | None] | None = None  # the spending caps and today's spend against them, if any


@dataclass
class Tally:
    """Calls added up under one model or one chat."""

    calls: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    roles: list[str] = field(default_factory=list)
    cost: float = 0.0  # of the calls whose price is known
    unpriced: list[str] = field(default_factory=list)  # models of calls with no known price

    def add(self, row: UsageTotal, cost: float | None) -> None:
        self.calls += row.calls
        self.failed += row.failed
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        self.cache_read_tokens += row.cache_read_tokens
        self.cache_write_tokens += row.cache_write_tokens
        if row.role and row.role not in self.roles:
            self.roles.append(row.role)
        if cost is None:
            if row.model and row.model not in self.unpriced:
                self.unpriced.append(row.model)
        else:
            self.cost += cost

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


def usage_commands(sources: UsageSources) -> list[OwnerCommand]:
    async def usage(asked: Asked) -> str:
        now = sources.clock()
        answer = usage_text(sources.totals(day_start(now)), sources.totals(week_start(now)), now)
        caps = sources.caps() if sources.caps is not None else None
        return _noted(f"{answer}\n\n{caps}" if caps else answer, sources.note)

    async def cost(asked: Asked) -> str:
        period = asked.argument.lower()
        if period not in ("", "day", "today", "week"):
            return "Say /cost for today, or /cost week for this week (both from 00:00 UTC)."
        now = sources.clock()
        week = period == "week"
        since = week_start(now) if week else day_start(now)
        answer = cost_text(sources.totals(since), Prices.load(sources.prices_path), period_name(since, week=week))
        return _noted(answer, sources.note)

    return [
        OwnerCommand("usage", "/usage", "tokens per model and per chat, today and this week (UTC), and the caps", usage),
        OwnerCommand("cost", "/cost [day|week]", "what the models cost today or this week, per model and chat", cost),
    ]


# --- periods: UTC days, weeks from Monday ---


def day_start(now: float) -> float:
    """00:00 UTC of `now`'s day."""
    at = datetime.fromtimestamp(now, UTC)
    return at.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def week_start(now: float) -> float:
    """00:00 UTC of the Monday of `now`'s week (today, on a Monday)."""
    day = datetime.fromtimestamp(day_start(now), UTC)
    return (day - timedelta(days=day.weekday())).timestamp()


def period_name(since: float, *, week: bool) -> str:
    if not week:
        return "today (since 00:00 UTC)"
    monday = datetime.fromtimestamp(since, UTC)
    return f"this week (since Monday {monday.day} {monday:%b}, 00:00 UTC)"


# --- the answers ---


def usage_text(today: list[UsageTotal], week: list[UsageTotal], now: float) -> str:
    """Tokens per model and per chat, today and this week."""
    lines = ["Tokens the models reported (in = input, out = output; cache reads and writes apart):", ""]
    for rows, name in ((today, period_name(day_start(now), week=False)), (week, period_name(week_start(now), week=True))):
        if not rows:
            lines += [f"No model calls {name.split(' (')[0]}.", ""]
            continue
        lines.append(f"{name[0].upper()}{name[1:]}:")
        lines.append("By model")
        for model, tally in _by(rows, lambda row: row.model or "?"):
            lines.append(f"• {model} ({', '.join(tally.roles)}): {_tokens(tally)}, {_calls(tally)}")
        lines.append("By chat")
        for chat, tally in _by(rows, lambda row: row.chat or NO_CHAT):
            lines.append(f"• {chat}: {_tokens(tally)}, {_calls(tally)}")
        lines.append("")
    return "\n".join(lines).rstrip()


def cost_text(rows: list[UsageTotal], prices: Prices, period: str) -> str:
    """Money per model and per chat and in all; a model with no known price is listed as such and left out."""
    lines = [prices.problem, ""] if prices.problem else []
    if not rows:
        return "\n".join([*lines, f"No model calls {period.split(' (')[0]}: nothing spent."])
    priced = [(row, row_cost(row, prices)) for row in rows]
    lines.append(f"Cost {period}, in USD:")
    lines.append("By model")
    models = _tally(priced, lambda row: row.model or "?")
    for model, tally in models:
        if tally.unpriced:
            lines.append(f"• {model}: price unknown ({_tokens(tally)})")
        else:
            lines.append(f"• {model}: {money(tally.cost)} ({_tokens(tally)}){_free_note(model, tally.cost)}")
    lines.append("By chat")
    for chat, tally in _tally(priced, lambda row: row.chat or NO_CHAT):
        if tally.unpriced and not tally.cost:
            lines.append(f"• {chat}: price unknown")
        elif tally.unpriced:
            lines.append(f"• {chat}: {money(tally.cost)}, plus calls of a model with no known price")
        else:
            lines.append(f"• {chat}: {money(tally.cost)}")
    total = sum(tally.cost for _, tally in models)
    unknown = [model for model, tally in models if tally.unpriced]
    lines.append(f"Total: {money(total)}")
    if unknown:
        lines.append(
            f"Not in the total: {', '.join(unknown)} (price unknown). Give a model its price in {prices.path}, "
            'e.g. {"' + unknown[0] + '": {"input": 2.5, "output": 10}} (USD per million tokens).'
        )
    return "\n".join(lines)


def row_cost(row: UsageTotal, prices: Prices) -> float | None:
    """What a group of calls cost: the provider's own figure where it reported one, else by the price list; None
    when the model's price is unknown."""
    if row.cost_usd is not None:
        return row.cost_usd
    price = prices.price(row.model or "")
    if price is None:
        return None
    return price.cost(row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_write_tokens)


def money(amount: float) -> str:
    """`$0`, `<$0.0001`, `$0.0123`, `$4.56`."""
    if amount == 0:
        return "$0"
    if amount < 0.0001:
        return "<$0.0001"
    return f"${amount:,.4f}" if amount < 1 else f"${amount:,.2f}"


def _noted(answer: str, note: str | None) -> str:
    return f"{answer}\n\n{note}" if note else answer


def _free_note(model: str, cost: float) -> str:
    return " (runs on this machine)" if model.split(":", 1)[0] in FREE_PROVIDERS and cost == 0 else ""


def _by(rows: Iterable[UsageTotal], key: Callable[[UsageTotal], str]) -> list[tuple[str, Tally]]:
    return _tally(((row, 0.0) for row in rows), key)


def _tally(rows: Iterable[tuple[UsageTotal, float | None]], key: Callable[[UsageTotal], str]) -> list[tuple[str, Tally]]:
    """The rows added up per key, most tokens first (then by name)."""
    tallies: dict[str, Tally] = {}
    for row, cost in rows:
        tallies.setdefault(key(row), Tally()).add(row, cost)
    return sorted(tallies.items(), key=lambda item: (-item[1].tokens, item[0]))


def _tokens(tally: Tally) -> str:
    text = f"{tally.input_tokens:,} in, {tally.output_tokens:,} out"
    if tally.cache_read_tokens or tally.cache_write_tokens:
        text += f", cache {tally.cache_read_tokens:,} read / {tally.cache_write_tokens:,} written"
    return text


def _calls(tally: Tally) -> str:
    text = f"{tally.calls} call{'s' if tally.calls != 1 else ''}"
    return f"{text}, {tally.failed} failed" if tally.failed else text
