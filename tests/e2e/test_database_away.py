"""PostgreSQL dropping every connection in the middle of a turn (a restart, a failover): the turn's reply is sent
once, the message is answered once, and the chat goes on."""

from __future__ import annotations

import threading

from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.support.chat import eventually
from tests.unit.test_postgres_reconnect import drop_connections


async def test_connections_dropped_while_the_model_thinks_lose_nothing_and_double_nothing(
    telegram, models, start_bot, postgres_url
):
    thinking = threading.Event()
    models.script(Reply(text="The kettle is on.", hold=(0, thinking)), Reply(text="Still here."))
    app = await start_bot(database_url=postgres_url)
    telegram.user_sends(OWNER, "put the kettle on")
    await eventually(lambda: len(models.requests) == 1, "the model to be asked")
    assert drop_connections(postgres_url) >= 1  # the app's connection, mid-turn
    thinking.set()
    assert (await telegram.await_sent(OWNER, 1))[0]["text"] == "The kettle is on."
    await eventually(
        lambda: [tuple(r) for r in app.stores.db.query("SELECT text, status FROM messages WHERE direction = 'in'")]
        == [("put the kettle on", "consumed")],
        "the message recorded as answered",
    )
    drop_connections(postgres_url)  # between turns too
    telegram.user_sends(OWNER, "are you still there?")
    sent = await telegram.await_sent(OWNER, 2)
    assert [m["text"] for m in sent] == ["The kettle is on.", "Still here."]
    assert len(models.requests) == 2  # neither message was answered twice
