"""When a schedule falls due: cron and local times resolved in a time zone, and how they read back."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

_GAPS_CHECKED = 12  # consecutive fires looked at for the minimum interval


class BadTime(ValueError):
    """A time, zone or cron expression a person gave that cannot be scheduled; the message says why."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadTime(f"unknown time zone {name!r}: use an IANA name like Europe/Berlin") from None


def local_to_epoch(text: str, tz: str) -> float:
    """`YYYY-MM-DD HH:MM` on the wall clock of `tz`. A time the DST jump skips moves forward by the
    jump (02:30 becomes 03:30); a time that happens twice means the first one."""
    try:
        naive = datetime.fromisoformat(text.strip().replace("T", " "))
    except ValueError:
        raise BadTime(f"cannot read the time {text!r}: give it as YYYY-MM-DD HH:MM") from None
    if naive.tzinfo is not None:
        naive = naive.replace(tzinfo=None)
    return naive.replace(tzinfo=zone(tz), fold=0).timestamp()


def next_cron(expr: str, tz: str, after: float) -> float:
    """The first time strictly after `after` that the cron expression matches on `tz`'s wall clock."""
    start = datetime.fromtimestamp(after, zone(tz))
    try:
        return next(CronSim(expr, start)).timestamp()
    except (CronSimError, StopIteration, ValueError) as exc:
        raise BadTime(f"cannot use the cron expression {expr!r} ({exc or 'it never matches'}); "
                      "five fields: minute hour day-of-month month day-of-week, e.g. '30 8 * * 1-5'") from None


def shortest_gap(expr: str, tz: str, after: float) -> float:
    """The shortest time between consecutive fires over the next few, to refuse "every second"."""
    times = [next_cron(expr, tz, after)]
    for _ in range(_GAPS_CHECKED):
        times.append(next_cron(expr, tz, times[-1]))
    return min(b - a for a, b in pairwise(times))


def readable(epoch: float, tz: str) -> str:
    """How a due time reads to a person: `Tue 24 Nov 2026, 09:00 Europe/Berlin`."""
    local = datetime.fromtimestamp(epoch, zone(tz))
    return f"{local:%a} {local.day} {local:%b %Y}, {local:%H:%M} {tz}"


def lateness(seconds: float) -> str:
    """`2 h`, `15 min`, `1 day 3 h`: how late a fire is, rounded to what a person cares about."""
    minutes = int(seconds // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = []
    if days:
        parts.append(f"{days} day" + ("s" if days > 1 else ""))
    if hours:
        parts.append(f"{hours} h")
    if minutes and not days:
        parts.append(f"{minutes} min")
    return " ".join(parts) or "under a minute"


def utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)
