"""The outbox table keeps what is still to send, and forgets what went out long ago."""

from __future__ import annotations

from pathlib import Path

from bicameral.events import SendText
from bicameral.store.db import Database
from bicameral.store.outbox import GIVEN_UP, PENDING, SENT, OutboxStore

DAY = 86400.0


def test_entries_finished_before_the_cut_are_forgotten_and_pending_ones_never(tmp_path: Path) -> None:
    now = [1_000_000.0]
    store = OutboxStore(Database(tmp_path / "db.sqlite"), clock=lambda: now[0])
    old_sent, old_refused, still_pending, recent = (
        store.add([SendText(chat=f"telegram:{i}", text="hi")], [now[0]])[0] for i in range(4)
    )
    store.finish(old_sent.id, SENT)
    store.finish(old_refused.id, GIVEN_UP, "blocked")
    now[0] += 10 * DAY
    store.finish(recent.id, SENT)

    assert store.prune_finished(before=now[0] - 7 * DAY) == 2
    assert store.state_of(old_sent.id) is None and store.state_of(old_refused.id) is None
    assert store.state_of(still_pending.id) == PENDING  # ten days unsent is still to send
    assert store.state_of(recent.id) == SENT
