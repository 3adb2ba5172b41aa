"""The outbox table keeps what is still to send, and forgets what went out long ago."""

from __future__ import annotations

from bicameral.events import DeleteMessage, EditText, SendFile, SendText
from bicameral.store.outbox import GIVEN_UP, PENDING, SENT, OutboxStore, QueuePlace
from bicameral.store.sql import SqlDatabase

DAY = 86400.0


def test_entries_finished_before_the_cut_are_forgotten_and_pending_ones_never(database: SqlDatabase) -> None:
    now = [1_000_000.0]
    store = OutboxStore(database, clock=lambda: now[0])
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


def test_a_message_is_kept_redacted_and_one_without_secrets_exactly_as_given(database: SqlDatabase) -> None:
    store = OutboxStore(database)
    key = "sk-" + "a1B2" * 12
    plain = SendText(chat="telegram:1", text="see you at 5", reply_to="41", thread_id="7")
    secret = SendFile(chat="telegram:1", path="/data/report.pdf", caption=f"the key is {key}")
    store.add([plain, secret], [0.0, 0.0])

    kept = [entry.action for entry in store.pending()]
    assert kept[0] == plain
    assert isinstance(kept[1], SendFile) and kept[1].path == secret.path
    assert key not in (kept[1].caption or "") and "REDACTED" in (kept[1].caption or "")


def test_the_head_place_names_the_first_unsent_message_its_tries_and_when_it_is_due(database: SqlDatabase) -> None:
    store = OutboxStore(database)
    first, second = store.add([SendText(chat="telegram:1", text=t) for t in ("one", "two")], [10.0, 10.0])
    store.add([SendText(chat="telegram:2", text="elsewhere")], [10.0])
    assert store.head_place("telegram:1") == QueuePlace(first.id, 0, 10.0)

    store.retry_later(first.id, 99.0, "429")
    assert store.head_place("telegram:1") == QueuePlace(first.id, 1, 99.0)
    store.finish(first.id, SENT)
    assert store.head_place("telegram:1") == QueuePlace(second.id, 0, 10.0)
    store.finish(second.id, GIVEN_UP, "blocked")
    assert store.head_place("telegram:1") is None


def test_edits_and_deletions_are_kept_too_an_edit_redacted_like_a_message(database: SqlDatabase) -> None:
    store = OutboxStore(database)
    key = "sk-" + "a1B2" * 12
    edit = EditText(chat="telegram:1", message_id="41", text=f"the key is {key}")
    delete = DeleteMessage(chat="telegram:1", message_id="41")
    notice = SendText(chat="telegram:1", text="a notice", purpose="notice")
    store.add([edit, delete, notice], [0.0, 0.0, 0.0])
    kept = [entry.action for entry in store.pending()]
    assert isinstance(kept[0], EditText) and kept[0].message_id == "41" and key not in kept[0].text
    assert kept[1:] == [delete, notice]


def test_the_parts_of_a_text_already_delivered_are_kept_with_its_next_try(database: SqlDatabase) -> None:
    store = OutboxStore(database)
    [entry] = store.add([SendText(chat="telegram:1", text="long")], [0.0])
    assert entry.parts_sent == ()
    store.retry_later(entry.id, 5.0, "429", ("101",))
    [waiting] = store.pending()
    assert waiting.parts_sent == ("101",) and waiting.action.sent_parts == () and waiting.attempts == 1
    store.retry_later(entry.id, 9.0, "429", ("101", "102"))
    assert store.head("telegram:1").parts_sent == ("101", "102")  # type: ignore[union-attr]


def test_an_entry_written_before_purposes_and_parts_reads_as_a_conversation_message(database: SqlDatabase) -> None:
    db = database
    store = OutboxStore(db)
    db.execute(
        "INSERT INTO outbox (chat, action, not_before, created_at) VALUES (?, ?, 0, 0)",
        ("telegram:1", '{"type": "SendText", "chat": "telegram:1", "text": "hi", "reply_to": null, "thread_id": null}'),
    )
    [entry] = store.pending()
    assert entry.action == SendText(chat="telegram:1", text="hi") and entry.parts_sent == ()


def test_an_answer_holds_its_messages_from_the_moment_it_is_recorded_and_answers_them_once_out(
    database: SqlDatabase,
) -> None:
    from bicameral.events import Inbound, Sender
    from bicameral.store.messages import MessageStore

    messages = MessageStore(database)
    rows = [
        messages.record_inbound(Inbound(channel="telegram", chat="telegram:1", message_id=str(n), text=f"m{n}",
                                        sender=Sender(id="1", name="A"), ts=float(n), update_id=n))
        for n in (1, 2)
    ]
    assert None not in rows
    held = [row for row in rows if row is not None]
    store = OutboxStore(database)
    first, last = store.add([SendText(chat="telegram:1", text="part one"), SendText(chat="telegram:1", text="two")],
                            [0.0, 0.0], "turn-1", answers=held)
    # Recorded, not yet out: a restart delivers it and must not answer these messages again.
    assert store.held_rows() == store.held_rows("telegram:1") == set(held)
    assert store.held_rows("telegram:2") == set()  # another chat's: a worker taking it asks for that chat only
    assert [i.row_id for i in messages.pending_inbound()] == held
    store.finish(first.id, SENT)
    assert messages.pending_count() == 2  # the last part holds them
    store.finish(last.id, SENT)
    assert store.held_rows() == set() and messages.pending_count() == 0
