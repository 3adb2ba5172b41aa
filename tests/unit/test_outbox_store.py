"""The outbox table keeps what is still to send, and forgets what went out long ago."""

from __future__ import annotations

from pathlib import Path

from bicameral.events import SendFile, SendText
from bicameral.store.db import Database
from bicameral.store.outbox import GIVEN_UP, PENDING, SENT, OutboxStore, QueuePlace

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


def test_a_message_is_kept_redacted_and_one_without_secrets_exactly_as_given(tmp_path: Path) -> None:
    store = OutboxStore(Database(tmp_path / "db.sqlite"))
    key = "sk-" + "a1B2" * 12
    plain = SendText(chat="telegram:1", text="see you at 5", reply_to="41", thread_id="7")
    secret = SendFile(chat="telegram:1", path="/data/report.pdf", caption=f"the key is {key}")
    store.add([plain, secret], [0.0, 0.0])

    kept = [entry.action for entry in store.pending()]
    assert kept[0] == plain
    assert isinstance(kept[1], SendFile) and kept[1].path == secret.path
    assert key not in (kept[1].caption or "") and "REDACTED" in (kept[1].caption or "")


def test_the_head_place_names_the_first_unsent_message_its_tries_and_when_it_is_due(tmp_path: Path) -> None:
    store = OutboxStore(Database(tmp_path / "db.sqlite"))
    first, second = store.add([SendText(chat="telegram:1", text=t) for t in ("one", "two")], [10.0, 10.0])
    store.add([SendText(chat="telegram:2", text="elsewhere")], [10.0])
    assert store.head_place("telegram:1") == QueuePlace(first.id, 0, 10.0)

    store.retry_later(first.id, 99.0, "429")
    assert store.head_place("telegram:1") == QueuePlace(first.id, 1, 99.0)
    store.finish(first.id, SENT)
    assert store.head_place("telegram:1") == QueuePlace(second.id, 0, 10.0)
    store.finish(second.id, GIVEN_UP, "blocked")
    assert store.head_place("telegram:1") is None
