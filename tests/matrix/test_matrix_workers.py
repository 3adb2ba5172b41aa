"""Matrix with several workers: the worker that does not sync answers the Matrix chats it takes.

Two real `bicameral run` processes on a real PostgreSQL and a real Synapse (and the fake Telegram, which tells the
test which worker polls), the fake model.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from bench.harness import open_access
from tests.e2e.test_process import BotProcess
from tests.e2e.test_workers import procs, relays, serving, standing_by, workers  # noqa: F401 (fixtures)
from tests.support.together import answered_together

TAKEN = re.compile(r"chat (matrix:\S+) taken by this worker")


def taken_by(worker: BotProcess) -> set[str]:
    return set(TAKEN.findall(worker.output()))


@pytest.mark.timeout(300)
async def test_the_worker_that_does_not_sync_answers_the_matrix_dm_it_takes(
    tmp_path, synapse, matrix_user, human, models, workers  # noqa: F811 (the fixture imported above)
):
    # Each worker runs one turn at a time, and the model answers only once two requests wait together: two DMs are
    # answered only if each worker takes one, so the worker that does not sync must answer on Matrix itself.
    respond, together = answered_together(2)
    models.responder(respond)
    bot, ann, bob = matrix_user("bot", "Archie"), human("ann"), human("bob")
    open_access(tmp_path / "data")
    pairs = workers(2, BICAMERAL_MAX_CONCURRENT_TURNS=1, BICAMERAL_CHAT_LEASE_SECONDS=3,
                    BICAMERAL_MATRIX_HOMESERVER=synapse.url, BICAMERAL_MATRIX_USER_ID=bot.user_id,
                    BICAMERAL_MATRIX_PASSWORD=bot.password)
    for worker, _ in pairs:
        worker.start()
    server, _ = await asyncio.to_thread(serving, pairs)
    helper = next(worker for worker, _ in pairs if worker is not server)
    await asyncio.to_thread(standing_by, helper)
    rooms = {ann: await ann.room(bot.user_id, direct=True), bob: await bob.room(bot.user_id, direct=True)}
    for person, room in rooms.items():
        await person.say(room, f"hello from {person.user.user_id}")
    for person, room in rooms.items():
        answers = await person.await_from(room, bot.user_id, timeout=120)
        assert [a["content"]["body"] for a in answers] == ["answered"]
    assert together.is_set()
    assert taken_by(server) and taken_by(helper), "each worker took one of the DMs"
    assert taken_by(server) | taken_by(helper) == {f"matrix:{room}" for room in rooms.values()}
