"""Times as the owner's reports show them: "2 min ago (14:03 UTC)", "in 12 min (14:15 UTC)", "3 h 5 min"."""

from __future__ import annotations

from datetime import UTC, datetime


def span(seconds: float) -> str:
    """A length of time, to the unit that matters: "40 s", "12 min", "3 h 5 min", "2 days 4 h"."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} day{'s' if days != 1 else ''} {hours} h" if hours else f"{days} day{'s' if days != 1 else ''}"


def utc_clock(then: float, now: float) -> str:
    """The UTC time of day; with the date when it is not today's (UTC)."""
    at, today = datetime.fromtimestamp(then, UTC), datetime.fromtimestamp(now, UTC)
    if at.date() == today.date():
        return at.strftime("%H:%M UTC")
    return at.strftime("%Y-%m-%d %H:%M UTC")


def ago(then: float | None, now: float) -> str:
    """When something happened, as "2 min ago (14:03 UTC)"; "never" for None."""
    if then is None:
        return "never"
    if now - then < 1:
        return f"just now ({utc_clock(then, now)})"
    return f"{span(now - then)} ago ({utc_clock(then, now)})"


def ahead(then: float, now: float) -> str:
    """When something is due, as "in 12 min (14:15 UTC)"; "now" once the time has come."""
    if then <= now:
        return f"now (due {utc_clock(then, now)})"
    return f"in {span(then - now)} ({utc_clock(then, now)})"
