"""What outlives a CLI process: the backoff sequence, the sliding crash window, the stored session id."""

from __future__ import annotations

from bicameral.backoff import Backoff, backoff_delay
from bicameral.claude_code.supervision import CrashBudget, SessionIds
from bicameral.store import Stores


def test_backoff_doubles_from_the_base_up_to_the_cap():
    assert [backoff_delay(2, 64, n) for n in range(1, 10)] == [2, 4, 8, 16, 32, 64, 64, 64, 64]
    assert backoff_delay(0.5, 3, 1) == 0.5 and backoff_delay(0.5, 3, 5) == 3


def test_a_running_backoff_starts_over_after_a_success():
    backoff = Backoff(1, 30)
    assert [backoff.next() for _ in range(6)] == [1, 2, 4, 8, 16, 30]
    backoff.reset()
    assert backoff.next() == 1


def test_only_crashes_inside_the_window_count():
    now = [0.0]
    budget = CrashBudget(limit=3, window_seconds=600, clock=lambda: now[0])
    assert budget.record() and budget.record()
    now[0] = 601.0  # the first two fell out of the window
    assert budget.record() and budget.recent == 1
    now[0] = 700.0
    assert budget.record()
    now[0] = 800.0
    assert not budget.record()  # three within 600 s: spent
    assert budget.recent == 3


def test_a_session_is_confirmed_only_once_it_completed_a_turn(tmp_path):
    stores = Stores.open(tmp_path / "db.sqlite")
    ids = SessionIds(stores.kv, "claude_code.session:telegram:1")
    assert ids.get() is None and not ids.confirmed()
    ids.set("s1")
    assert ids.get() == "s1" and not ids.confirmed()
    ids.confirm("s1")
    assert ids.confirmed()
    ids.set("s2")  # a new session replaces it: not confirmed until its own turn completes
    assert not ids.confirmed()
    ids.clear()
    assert ids.get() is None and not ids.confirmed()
    stores.close()
