"""The chat queue on a real PostgreSQL: chats taken under a lease, rows another worker is taking skipped, the rows of a
chat another worker leases kept for it, and chats left with work and no live lease signalled again."""

from __future__ import annotations

import threading

import psycopg
import pytest

from bicameral.events import Inbound, Sender
from bicameral.store import Stores
from bicameral.store.chat_queue import WORK_CHANNEL, ChatQueue
from bicameral.store.leases import LeaseStore
from bicameral.tasks.store import OPEN_STATES

TTL = 30.0


@pytest.fixture
def stores(postgres_url):
    opened = Stores.open(postgres_url)
    yield opened
    opened.db.close()


def queue(stores: Stores) -> ChatQueue:
    return ChatQueue(stores.db, LeaseStore(stores.db), open_task_states=OPEN_STATES)


def rows(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [(str(c), str(ch)) for c, ch in conn.execute("SELECT chat, channel FROM chat_queue ORDER BY id")]


def message(chat: str, text: str = "hi") -> Inbound:
    return Inbound(channel="telegram", chat=chat, sender=Sender(id="1", name="A"), text=text, message_id="m1", ts=1.0)


def test_a_chat_is_taken_once_under_a_lease_and_its_rows_go(stores, postgres_url) -> None:
    chats = queue(stores)
    chats.signal([("telegram:1", "telegram"), ("telegram:2", "telegram"), ("telegram:1", "telegram")])
    taken = chats.take("w1", ["telegram"], now=100.0, ttl=TTL, room=1)
    assert [lease.chat for lease in taken] == ["telegram:1"]
    assert rows(postgres_url) == [("telegram:2", "telegram")]  # both of chat 1's rows went; chat 2 waits
    assert chats.take("w2", ["telegram"], now=100.0, ttl=TTL, room=5)[0].chat == "telegram:2"
    assert rows(postgres_url) == []


def test_a_chat_another_worker_leases_keeps_its_rows_for_that_worker(stores, postgres_url) -> None:
    chats = queue(stores)
    LeaseStore(stores.db).claim("telegram:1", "w1", now=100.0, ttl=TTL)
    chats.signal([("telegram:1", "telegram")])
    assert chats.take("w2", ["telegram"], now=101.0, ttl=TTL, room=5) == []
    assert rows(postgres_url) == [("telegram:1", "telegram")]
    mine = chats.take("w1", ["telegram"], now=102.0, ttl=TTL, room=5)  # its holder takes them, its lease extended
    assert [(lease.worker, lease.epoch, lease.deadline) for lease in mine] == [("w1", 1, 132.0)]
    assert rows(postgres_url) == []


def test_only_chats_of_channels_the_worker_can_send_on_are_taken(stores, postgres_url) -> None:
    chats = queue(stores)
    chats.signal([("matrix:!room", "matrix"), ("telegram:1", "telegram")])
    assert [lease.chat for lease in chats.take("w1", ["telegram"], now=100.0, ttl=TTL, room=5)] == ["telegram:1"]
    assert rows(postgres_url) == [("matrix:!room", "matrix")]
    assert chats.take("w1", [], now=100.0, ttl=TTL, room=5) == []


def test_rows_another_worker_is_taking_are_skipped_not_waited_for(stores, postgres_url) -> None:
    chats = queue(stores)
    chats.signal([("telegram:1", "telegram"), ("telegram:2", "telegram")])
    with psycopg.connect(postgres_url) as other:  # another worker in the middle of its take: row 1 locked
        other.execute("SELECT id FROM chat_queue WHERE chat = 'telegram:1' FOR UPDATE")
        done = threading.Event()
        result: list[str] = []

        def take() -> None:
            result.extend(lease.chat for lease in chats.take("w2", ["telegram"], now=100.0, ttl=TTL, room=5))
            done.set()

        threading.Thread(target=take, daemon=True).start()
        assert done.wait(30), "the take waited on the other worker's locked row"
        assert result == ["telegram:2"]
        other.rollback()
    assert rows(postgres_url) == [("telegram:1", "telegram")]


def test_a_signal_wakes_a_listening_worker(stores, postgres_url) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {WORK_CHANNEL}")
        queue(stores).signal([("telegram:1", "telegram")])
        assert [n.channel for n in listener.notifies(timeout=30, stop_after=1)] == [WORK_CHANNEL]


def test_work_without_a_live_lease_is_signalled_again(stores, postgres_url) -> None:
    chats = queue(stores)
    leases = LeaseStore(stores.db)
    stores.messages.record_inbound(message("telegram:1"))  # unanswered, nobody holds the chat
    stores.messages.record_inbound(message("telegram:2"))  # unanswered, its holder is alive
    leases.claim("telegram:2", "w1", now=100.0, ttl=TTL)
    leases.claim("telegram:3", "dead", now=10.0, ttl=TTL)  # run out long ago (a task, say, was left open)
    assert chats.signal_orphans(now=100.0) == 2
    assert sorted(rows(postgres_url)) == [("telegram:1", "telegram"), ("telegram:3", "telegram")]
    assert chats.signal_orphans(now=100.0) == 0  # signalled already: not again
    taken = chats.take("w2", ["telegram"], now=100.0, ttl=TTL, room=5)
    assert sorted((lease.chat, lease.epoch) for lease in taken) == [("telegram:1", 1), ("telegram:3", 2)]


def test_a_full_worker_takes_what_waits_for_its_own_chats_and_leaves_new_chats_unleased(stores, postgres_url) -> None:
    chats = queue(stores)
    leases = LeaseStore(stores.db)
    leases.claim("telegram:1", "w1", now=100.0, ttl=TTL)
    chats.signal([("telegram:2", "telegram"), ("telegram:3", "telegram"), ("telegram:1", "telegram")])
    mine = chats.take("w1", ["telegram"], now=101.0, ttl=TTL, room=0)  # at capacity: no room for new chats
    assert [lease.chat for lease in mine] == ["telegram:1"]
    assert leases.holder("telegram:2") is None and leases.holder("telegram:3") is None  # never claimed to be let go
    assert rows(postgres_url) == [("telegram:2", "telegram"), ("telegram:3", "telegram")]
    # Room for one: the first new chat in the queue's order, with all of its rows.
    chats.signal([("telegram:2", "telegram")])
    assert [lease.chat for lease in chats.take("w1", ["telegram"], now=102.0, ttl=TTL, room=1)] == ["telegram:2"]
    assert rows(postgres_url) == [("telegram:3", "telegram")]
