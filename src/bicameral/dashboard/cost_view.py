"""The cost page: what the models cost per UTC day, per model and per chat, as inline SVG bars (no script) with
the same figures in a table beside each chart; priced as /cost prices them (console/usage.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from bicameral.console.prices import BUILT_IN, Prices
from bicameral.console.usage import NO_CHAT, day_start, money, row_cost
from bicameral.store.usage import UsageTotal

DAYS = 14
DAY = 86400.0
BAR_WIDTH = 360
ROW = 22
LABEL = 220


@dataclass(frozen=True)
class Bars:
    """One chart: (label, dollars) rows, and the models whose calls have no known price (left out of the sums)."""

    title: str
    rows: list[tuple[str, float]]
    unpriced: list[str]


def cost_body(usage: Callable[[float, float], list[UsageTotal]], prices_path: Path | None, now: float) -> str:
    """The cost page's charts and tables, under what the prices file's problem is, if it has one."""
    prices = Prices.load(prices_path) if prices_path is not None else Prices(dict(BUILT_IN), Path("prices.json"))
    problem = f"<p>{escape(prices.problem)}</p>" if prices.problem else ""
    return problem + "".join(chart_html(bars, n) for n, bars in enumerate(cost_charts(usage, prices, now)))


def cost_charts(usage: Callable[[float, float], list[UsageTotal]], prices: Prices, now: float) -> list[Bars]:
    """Per day (the last 14 UTC days, today last), per model and per chat over those days."""
    today = day_start(now)
    days: list[tuple[str, float]] = []
    models: dict[str, float] = {}
    chats: dict[str, float] = {}
    unpriced: list[str] = []
    for back in range(DAYS - 1, -1, -1):
        since = today - back * DAY
        spent = 0.0
        for row in usage(since, since + DAY):
            cost = row_cost(row, prices)
            if cost is None:
                if (row.model or "?") not in unpriced:
                    unpriced.append(row.model or "?")
                continue
            spent += cost
            models[row.model or "?"] = models.get(row.model or "?", 0.0) + cost
            chats[row.chat or NO_CHAT] = chats.get(row.chat or NO_CHAT, 0.0) + cost
        days.append((f"{datetime.fromtimestamp(since, UTC):%Y-%m-%d}", spent))
    return [Bars(f"Per day (UTC), the last {DAYS} days", days, unpriced),
            Bars(f"Per model, the last {DAYS} days", ranked(models), unpriced),
            Bars(f"Per chat, the last {DAYS} days", ranked(chats), unpriced)]


def ranked(spent: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(spent.items(), key=lambda item: (-item[1], item[0]))


def chart_html(bars: Bars, number: int) -> str:
    """The bars as an SVG image (its figures named in its title) and as a table, side by side."""
    if not bars.rows:
        return f"<section><h2>{escape(bars.title)}</h2><p>No priced model calls.</p></section>"
    top = max((dollars for _, dollars in bars.rows), default=0.0) or 1.0
    height = ROW * len(bars.rows)
    drawn = []
    for n, (label, dollars) in enumerate(bars.rows):
        y = n * ROW
        width = round(BAR_WIDTH * dollars / top)
        drawn.append(
            f'<text x="{LABEL - 6}" y="{y + 15}" text-anchor="end">{escape(label[:32])}</text>'
            f'<rect class="bar" x="{LABEL}" y="{y + 3}" width="{width}" height="{ROW - 6}" fill="#4a7bb7">'
            f"<title>{escape(label)}: {money(dollars)}</title></rect>"
            f'<text x="{LABEL + width + 6}" y="{y + 15}">{money(dollars)}</text>'
        )
    title_id = f"chart-{number}"
    svg = (f'<svg role="img" aria-labelledby="{title_id}" width="{LABEL + BAR_WIDTH + 90}" height="{height}" '
           f'font-size="12" xmlns="http://www.w3.org/2000/svg"><title id="{title_id}">{escape(bars.title)}, in USD'
           f"</title>{''.join(drawn)}</svg>")
    cells = "".join(f"<tr><td>{escape(label)}</td><td>{money(dollars)}</td></tr>" for label, dollars in bars.rows)
    table = f"<table><caption>{escape(bars.title)}</caption><tr><th>what</th><th>USD</th></tr>{cells}</table>"
    note = (f"<p>Not counted (no known price): {escape(', '.join(bars.unpriced))}.</p>" if bars.unpriced else "")
    return (f'<section><h2>{escape(bars.title)}</h2><div class="chart">{svg}{table}</div>{note}</section>')
