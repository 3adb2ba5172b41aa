"""When a typed reminder falls due: the time words of "remind me tomorrow at 9 …" found, then resolved on the
user's wall clock.

The words are found here with small patterns (so a phrase is only ever one the rules understand); dates and
durations are read by dateparser, loaded with the first reminder (never at start); the hour of day follows the
rules below, since "at 5" or a day without an hour are choices dateparser leaves to us (it reads "at 5" as May):

- an hour with am/pm, a 24-hour clock ("18:30", "09:15"), noon and midnight are taken as written;
- a bare hour ("at 5") today is the next one to come (17:00 at 14:30); on another day 7-12 is the morning
  and 1-6 the afternoon; "morning", "afternoon", "evening" and "tonight" decide when they are said;
- a day with no hour is 09:00 ("morning" 09:00, "afternoon" 15:00, "evening" 19:00, "tonight" 20:00);
- a time of day already past today is tomorrow's; a weekday already past this week is next week's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from bicameral.store.schedule_times import zone

_NUMBER = (
    r"(?:\d+(?:\.\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty"
    r"|forty[- ]five|ninety|a\s+couple\s+of)"
)
_UNIT = r"(?:seconds?|secs?|minutes?|mins?|m|hours?|hrs?|h|days?|weeks?|months?)"
_DURATION = (
    rf"in\s+(?:half\s+an\s+hour|an\s+hour\s+and\s+a\s+half|(?:a\s+)?quarter\s+of\s+an\s+hour|{_NUMBER}\s*{_UNIT})"
)
_MERIDIEM = r"(?:am|pm|a\.m\.|p\.m\.)"
_CLOCK = (
    rf"(?:(?:at|by|around|for|@)\s+)?(?:\d{{1,2}}[:.]\d{{2}}(?:\s*{_MERIDIEM})?|\d{{1,2}}\s*{_MERIDIEM}"
    r"|noon|midday|midnight)(?!\w)"
    r"|(?:at|around|by)\s+\d{1,2}(?:\s+o'?clock)?(?![\d:.]|\s*%)"
)
_DAYPART = r"(?:this|tomorrow|in\s+the)\s+(?:morning|afternoon|evening|night)|tonight|morning|afternoon|evening"
_DAY = r"the\s+day\s+after\s+tomorrow|today|tomorrow|tmrw|tmr|tomorow"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ORDINAL = r"(?:st|nd|rd|th)"
_DATE = (
    rf"(?:on\s+)?(?:the\s+)?\d{{1,2}}{_ORDINAL}?(?:\s+of)?\s+{_MONTH}\b(?:\s+\d{{4}})?"
    rf"|(?:on\s+)?{_MONTH}\s+\d{{1,2}}{_ORDINAL}?(?!\d)(?:,?\s+\d{{4}})?"
    r"|(?:on\s+)?\d{4}-\d{2}-\d{2}"
)
_NTH = rf"(?:on\s+)?the\s+\d{{1,2}}{_ORDINAL}\b"
_NEXT = r"next\s+(?:week|month)"
_WEEKDAY_SAID = rf"(?:(?:on|next|this|coming)\s+)?{_WEEKDAY}"

# One piece of a time phrase; longer alternatives first.
_PART = rf"(?:{_DURATION}|{_DATE}|{_NTH}|{_NEXT}|{_DAYPART}|{_DAY}|{_WEEKDAY_SAID}|{_CLOCK})"
# A whole time phrase: pieces side by side ("tomorrow at 9", "at 9 am on Monday"), maybe led by "for".
TIME = rf"(?:for\s+)?{_PART}(?:\s*,?\s*(?:and\s+)?{_PART})*"
# At the end of a sentence a weekday or a date must be introduced ("to book a table for Friday" keeps its Friday).
_TAIL_PART = rf"(?:{_DURATION}|(?:on\s+)(?:{_DATE})|{_NTH}|{_NEXT}|{_DAYPART}|{_DAY}|(?:on|next|this)\s+{_WEEKDAY}|{_CLOCK})"
TAIL_TIME = rf"{_TAIL_PART}(?:\s*,?\s*{_TAIL_PART})*"
REPEATING = re.compile(r"\b(?:every|each|daily|weekly|monthly|hourly|weekdays|weekends)\b", re.IGNORECASE)

_DURATION_RE = re.compile(rf"^{_DURATION}$", re.IGNORECASE)
_CLOCK_RE = re.compile(
    rf"(?:(?P<h>\d{{1,2}})(?:[:.](?P<m>\d{{2}}))?\s*(?P<mer>{_MERIDIEM})?|(?P<word>noon|midday|midnight))", re.IGNORECASE
)
_DAYPART_HOURS = {"morning": 9, "afternoon": 15, "evening": 19, "night": 20, "tonight": 20}
_SPELLED = {
    "half an hour": "30 minutes", "an hour and a half": "90 minutes", "a quarter of an hour": "15 minutes",
    "quarter of an hour": "15 minutes", "a couple of": "2", "forty five": "45", "forty-five": "45", "ninety": "90",
}
_DAY_WORDS = {"tmrw": "tomorrow", "tmr": "tomorrow", "tomorow": "tomorrow"}
DEFAULT_HOUR = 9
MAX_PHRASE = 60  # "on Monday 30 November 2026 at 9:30 in the morning" is 49


@dataclass(frozen=True)
class Due:
    """A resolved time: a wall-clock time in the user's zone, or a span from now ("in 20 minutes")."""

    local: datetime  # naive, on the user's wall clock
    minutes_from_now: float | None = None  # set for a span: the reminder is kept as "in N minutes"

    @property
    def at(self) -> str:
        """As the schedule tools take a local time: `YYYY-MM-DD HH:MM`."""
        return f"{self.local:%Y-%m-%d %H:%M}"


def resolve(phrase: str, now: float, tz: str) -> Due | None:
    """The time `phrase` names, seen from `now` on `tz`'s wall clock; None when it names no usable time."""
    if len(phrase) > MAX_PHRASE:
        return None  # no time is said in so many words, and dateparser's time grows with them
    current = datetime.fromtimestamp(now, zone(tz)).replace(tzinfo=None, second=0, microsecond=0)
    exact_now = datetime.fromtimestamp(now, zone(tz)).replace(tzinfo=None)
    parts = [m.group(0).strip() for m in re.finditer(rf"\b(?:{_PART})", phrase, re.IGNORECASE)]  # re caches it
    span = next((p for p in parts if _DURATION_RE.match(p)), None)
    if span is not None:
        return _span(span, exact_now)
    clock = next((p for p in parts if _is_clock(p)), None)
    daypart = next((_daypart(p) for p in parts if _daypart(p)), None)
    day_words = [words for p in parts if not _is_clock(p) and (words := _day_words(p))]
    day, weekday = _day(day_words, current)
    if day_words and day is None:
        return None  # a date we cannot read: better to ask than to guess
    if clock is not None:
        hour, minute = _clock(clock, daypart, day, current)
    elif daypart is not None:
        hour, minute = _DAYPART_HOURS[daypart], 0
    elif day is not None and day != current.date():
        hour, minute = DEFAULT_HOUR, 0
    else:
        return None  # "today" alone names no time
    due = datetime.combine(day or current.date(), time(hour % 24, minute))
    if due <= current and day is None:
        due += timedelta(days=1)
    elif due <= current and weekday:
        due += timedelta(days=7)
    return Due(due)


def _span(words: str, now: datetime) -> Due | None:
    text = words.lower()
    for spelled, plain in _SPELLED.items():
        text = text.replace(spelled, plain)
    parsed = _parse(text, now)
    if parsed is None or parsed <= now:
        return None
    return Due(parsed.replace(second=0, microsecond=0), (parsed - now).total_seconds() / 60)


def _is_clock(part: str) -> bool:
    return re.fullmatch(_CLOCK, part, re.IGNORECASE) is not None


def _daypart(part: str) -> str | None:
    found = re.search(r"morning|afternoon|evening|night", part, re.IGNORECASE)
    return found.group(0).lower() if found else None


def _day_words(part: str) -> str:
    """What a piece of the phrase says about the day: "tomorrow" of "tomorrow morning", "today" of "tonight",
    nothing of "in the evening" or "at 9"."""
    text = part.lower()
    text = _DAY_WORDS.get(text, text)
    if re.fullmatch(r"tonight|this\s+(?:morning|afternoon|evening|night)", text):
        return "today"
    return re.sub(r"(?:\s*\bin\s+the)?\s*\b(?:morning|afternoon|evening|night)\b", "", text).strip()


def _day(words: list[str], current: datetime) -> tuple[date | None, bool]:
    """The day the words name (None: none named), and whether it was a weekday (which repeats weekly)."""
    if not words:
        return None, False
    text = " ".join(words)
    nth = re.fullmatch(rf"(?:on\s+)?the\s+(\d{{1,2}}){_ORDINAL}", text)
    if nth is not None:  # dateparser reads "the 1st" as January
        return _next_day_of_month(int(nth.group(1)), current.date()), False
    text = re.sub(r"\b(?:on|coming)\s+", "", text)
    if text == "today":
        return current.date(), False
    parsed = _parse(text, current)
    weekday = re.search(_WEEKDAY, text) is not None and not text.startswith("next")
    return (parsed.date() if parsed is not None else None), weekday


def _next_day_of_month(day: int, today: date) -> date | None:
    year, month = today.year, today.month
    for _ in range(13):
        if day >= today.day or (year, month) != (today.year, today.month):
            try:
                candidate = date(year, month, day)
            except ValueError:
                candidate = None
            if candidate is not None and candidate >= today:
                return candidate
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return None


def _clock(words: str, daypart: str | None, day: date | None, current: datetime) -> tuple[int, int]:
    found = _CLOCK_RE.search(words)
    assert found is not None  # `words` matched _CLOCK
    if found.group("word"):
        return (0, 0) if found.group("word").lower() == "midnight" else (12, 0)
    text = found.group("h")
    hour, minute = int(text), int(found.group("m") or 0)
    meridiem = (found.group("mer") or "").replace(".", "").lower()
    if meridiem:
        if meridiem == "pm" and hour < 12:
            hour += 12
        elif meridiem == "am" and hour == 12:
            hour = 0
        return hour, minute
    if hour > 12 or hour == 0 or (len(text) == 2 and text.startswith("0")):
        return hour, minute  # a 24-hour clock
    if daypart in ("afternoon", "evening", "night"):
        return (hour + 12 if hour < 12 else hour), minute
    if daypart == "morning":
        return hour % 12, minute
    if day is None or day == current.date():
        # The next one to come: at 14:30, "at 5" is 17:00 and "at 3" 15:00 (noon stays noon).
        morning = current.replace(hour=hour % 12, minute=minute)
        return (hour % 12 if morning > current else (hour % 12) + 12), minute
    return (hour if hour >= 7 else hour + 12), minute


def _parse(text: str, base: datetime) -> datetime | None:
    import dateparser  # half a second to load, so only with the first reminder

    settings: dict[str, Any] = {
        "PREFER_DATES_FROM": "future", "RELATIVE_BASE": base, "RETURN_AS_TIMEZONE_AWARE": False,
    }
    parsed = dateparser.parse(text, languages=["en"], settings=settings)
    return parsed if isinstance(parsed, datetime) else None
