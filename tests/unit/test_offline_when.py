"""When a typed reminder falls due: resolved on the user's wall clock from the injected now, in their zone."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bicameral.offline.when import resolve

ZONE = "America/New_York"
# Monday 2 March 2026, 08:10 in New York (13:10 UTC).
NOW = datetime(2026, 3, 2, 8, 10, tzinfo=ZoneInfo(ZONE)).timestamp()


@pytest.mark.parametrize(
    ("phrase", "due"),
    [
        ("at 8:30", "2026-03-02 08:30"),  # a bare hour: the next one to come
        ("at 7", "2026-03-02 19:00"),
        ("at 07:00", "2026-03-03 07:00"),  # a 24-hour clock as written, tomorrow once past
        ("at noon", "2026-03-02 12:00"),
        ("tonight", "2026-03-02 20:00"),
        ("this afternoon", "2026-03-02 15:00"),
        ("tomorrow", "2026-03-03 09:00"),  # a day without an hour: 09:00
        ("at 2 tomorrow", "2026-03-03 14:00"),  # another day: 1-6 is the afternoon ...
        ("tomorrow at 10", "2026-03-03 10:00"),  # ... and 7-12 the morning
        ("tomorrow evening at 6", "2026-03-03 18:00"),
        ("on Wednesday", "2026-03-04 09:00"),
        ("on Monday at 8", "2026-03-09 08:00"),  # today's 08:00 is past: next week's
        ("next Friday at 3", "2026-03-06 15:00"),
        ("on the 31st", "2026-03-31 09:00"),
        ("on 1 April at 6:15pm", "2026-04-01 18:15"),
        ("on Jan 5", "2027-01-05 09:00"),
    ],
)
def test_a_time_of_day_or_a_day_lands_on_the_wall_clock(phrase: str, due: str) -> None:
    resolved = resolve(phrase, NOW, ZONE)
    assert resolved is not None and resolved.at == due and resolved.minutes_from_now is None


@pytest.mark.parametrize(
    ("phrase", "minutes"),
    [("in 5 minutes", 5), ("in an hour", 60), ("in half an hour", 30), ("in a couple of hours", 120), ("in 2 days", 2880)],
)
def test_a_span_counts_from_now(phrase: str, minutes: float) -> None:
    resolved = resolve(phrase, NOW + 20, ZONE)  # 20 s past the minute: a span keeps them
    assert resolved is not None and resolved.minutes_from_now == pytest.approx(minutes)


def test_the_zone_is_the_users() -> None:
    resolved = resolve("at 9 tomorrow", NOW, "Asia/Tokyo")  # 22:10 in Tokyo
    assert resolved is not None and resolved.at == "2026-03-03 09:00"


def test_a_day_the_month_lacks_moves_to_the_next_month_that_has_it() -> None:
    feb = datetime(2026, 2, 10, 9, 0, tzinfo=ZoneInfo(ZONE)).timestamp()
    resolved = resolve("on the 30th", feb, ZONE)
    assert resolved is not None and resolved.at == "2026-03-30 09:00"


@pytest.mark.parametrize("phrase", ["today", "on the 45th", "tomorrow " * 20 + "at 5"])
def test_words_that_name_no_time_resolve_to_nothing(phrase: str) -> None:
    assert resolve(phrase, NOW, ZONE) is None
