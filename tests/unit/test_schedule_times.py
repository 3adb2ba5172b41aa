"""Due times on a person's wall clock: cron and exact times across DST, and how they read back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bicameral.store.schedule_times import BadTime, local_to_epoch, next_cron, readable, shortest_gap

BERLIN = "Europe/Berlin"


def _utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_a_local_time_reads_back_with_weekday_date_and_zone():
    due = local_to_epoch("2026-11-24 09:00", BERLIN)
    assert due == _utc("2026-11-24 08:00")
    assert readable(due, BERLIN) == "Tue 24 Nov 2026, 09:00 Europe/Berlin"


def test_a_time_the_spring_jump_skips_moves_forward_by_the_jump():
    due = local_to_epoch("2026-03-29 02:30", BERLIN)
    assert readable(due, BERLIN) == "Sun 29 Mar 2026, 03:30 Europe/Berlin"


def test_a_time_that_happens_twice_in_autumn_means_the_first():
    due = local_to_epoch("2026-10-25 02:30", BERLIN)
    assert due == _utc("2026-10-25 00:30")  # still summer time (+02:00)


def test_a_daily_cron_in_the_spring_gap_fires_once_that_day_after_the_jump():
    after = local_to_epoch("2026-03-28 12:00", BERLIN)
    first = next_cron("30 2 * * *", BERLIN, after)
    assert readable(first, BERLIN) == "Sun 29 Mar 2026, 03:00 Europe/Berlin"
    assert readable(next_cron("30 2 * * *", BERLIN, first), BERLIN) == "Mon 30 Mar 2026, 02:30 Europe/Berlin"


def test_a_daily_cron_in_the_autumn_repeat_fires_once():
    after = local_to_epoch("2026-10-24 12:00", BERLIN)
    first = next_cron("30 2 * * *", BERLIN, after)
    second = next_cron("30 2 * * *", BERLIN, first)
    assert readable(first, BERLIN) == "Sun 25 Oct 2026, 02:30 Europe/Berlin"
    assert readable(second, BERLIN) == "Mon 26 Oct 2026, 02:30 Europe/Berlin"


def test_a_weekday_cron_follows_local_time_not_utc():
    after = local_to_epoch("2026-11-20 12:00", "America/New_York")  # a Friday
    due = next_cron("30 8 * * 1-5", "America/New_York", after)
    assert readable(due, "America/New_York") == "Mon 23 Nov 2026, 08:30 America/New_York"


@pytest.mark.parametrize("expr", ["every day", "61 * * * *", "* * *", ""])
def test_a_malformed_cron_is_refused_with_the_expected_shape(expr):
    with pytest.raises(BadTime, match="five fields"):
        next_cron(expr, "UTC", 0)


def test_unknown_zone_and_unreadable_time_say_what_to_give():
    with pytest.raises(BadTime, match="IANA"):
        local_to_epoch("2026-11-24 09:00", "Mars/Olympus")
    with pytest.raises(BadTime, match="YYYY-MM-DD HH:MM"):
        local_to_epoch("tomorrow at nine", BERLIN)


def test_every_second_has_a_one_second_gap():
    assert shortest_gap("* * * * * *", "UTC", 0) == 1
    assert shortest_gap("0 9 * * 1-5", "UTC", 0) == 86400
