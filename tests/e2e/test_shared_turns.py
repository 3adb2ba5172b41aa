"""Turns shared across workers: every worker answers the chats it leases; a worker killed or paused past its lease
loses its chats to another, and each message is answered once.

Real `bicameral run` processes on a real PostgreSQL, the fake Telegram and the fake model.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading

import psycopg
import pytest

from bench.harness import open_access
from tests.conftest import OWNER
from tests.e2e.test_bicameral import _voice_echo
from tests.e2e.test_process import BotProcess, sent_texts
from tests.e2e.test_workers import inbound, procs, relays, serving, standing_by, workers  # noqa: F401 (fixtures)
from tests.fakes.model_server import Reply, ToolCall
from tests.support.chat import eventually_blocking, quiet_for_blocking
from tests.support.together import answered_together

pytestmark = pytest.mark.slow

LEASE_SECONDS = 3
TAKEN = re.compile(r"chat (telegram:-?\d+) taken by this worker")
DROPPED = "late result dropped"
STOPPED = "its work here stops"


def taken_by(worker: BotProcess) -> set[str]:
    return set(TAKEN.findall(worker.output()))


def asked_by(pool: list[BotProcess], telegram, models, text: str) -> BotProcess:
    """The owner says `text`; the worker that took the chat, once the model was asked."""
    telegram.user_sends(OWNER, text)
    models.wait_for_requests(1, timeout=60)
    return eventually_blocking(lambda: next((w for w in pool if taken_by(w)), None), "a worker to take the chat")


def replies_to(telegram, chat_id: int) -> list[str]:
    return [m.get("text", "") for m in telegram.sent_messages(chat_id)]


@pytest.fixture
def shared(tmp_path, workers):  # noqa: F811 (the fixture above)
    """Two workers with short leases, anyone may talk to them; both up (one serving, one running turns only)."""
    open_access(tmp_path / "data")

    def start(count: int = 2, **extra: object) -> list[BotProcess]:
        pairs = workers(count, BICAMERAL_CHAT_LEASE_SECONDS=LEASE_SECONDS, **extra)
        for worker, _ in pairs:
            worker.start()
        server, _ = serving(pairs)
        for worker, _ in pairs:
            if worker is not server:
                standing_by(worker)
        return [worker for worker, _ in pairs]

    return start


def test_both_workers_answer_chats_at_once_and_each_message_once(telegram, models, shared, postgres_url):
    # Each worker runs at most two turns at once; the model answers only once four requests wait together, which
    # happens only if both workers run turns at the same time.
    respond, together = answered_together(4)
    models.responder(respond)
    pool = shared(2, BICAMERAL_MAX_CONCURRENT_TURNS=2)
    chats = list(range(5001, 5007))
    for chat in chats:
        telegram.user_sends(chat, f"hello from {chat}", user_id=chat, first_name=f"P{chat}")
    eventually_blocking(together.is_set, "four turns at once, two on each worker", timeout=90)
    eventually_blocking(lambda: all(replies_to(telegram, chat) for chat in chats), "every chat answered", timeout=90)
    eventually_blocking(lambda: all(status == "consumed" for _, status in inbound(postgres_url)), "all consumed")
    quiet_for_blocking(1.0, "a second answer, were one coming, would be here by now")
    assert all(replies_to(telegram, chat) == ["answered"] for chat in chats)
    assert all(taken_by(worker) for worker in pool), "each worker took chats"


def test_a_worker_killed_mid_turn_its_chat_is_answered_once_by_the_other(telegram, models, shared, postgres_url):
    first = threading.Event()

    def respond(req):
        if not first.is_set():
            first.set()
            return Reply(text="too late", latency=30.0)  # the worker that asked dies before this arrives
        return Reply(text="answered once")

    models.responder(respond)
    pool = shared(2)
    taker = asked_by(pool, telegram, models, "please answer once")
    other = next(w for w in pool if w is not taker)
    taker.kill()
    eventually_blocking(lambda: sent_texts(telegram) == ["answered once"], "the other worker's answer", timeout=90)
    eventually_blocking(lambda: inbound(postgres_url) == [("please answer once", "consumed")], "the message consumed")
    assert other.proc is not None and other.proc.poll() is None
    quiet_for_blocking(1.0, "a second answer, were one coming, would be here by now")
    assert sent_texts(telegram) == ["answered once"]


def test_a_worker_paused_past_its_lease_has_its_late_answer_dropped(telegram, models, shared, postgres_url):
    first = threading.Event()
    paused = threading.Event()

    async def respond(req):
        if not first.is_set():
            first.set()
            await asyncio.to_thread(paused.wait, 60)  # answered once its worker is paused: it reads it when resumed
            return Reply(text="late answer")
        return Reply(text="answered by the other worker")

    models.responder(respond)
    pool = shared(2)
    taker = asked_by(pool, telegram, models, "who answers?")
    assert taker.proc is not None
    os.kill(taker.proc.pid, signal.SIGSTOP)
    try:
        paused.set()
        eventually_blocking(
            lambda: sent_texts(telegram) == ["answered by the other worker"], "the other worker's answer", timeout=90
        )
    finally:
        os.kill(taker.proc.pid, signal.SIGCONT)
    # Resumed, it either finds its lease gone first (and stops the turn) or records its answer first (and the outbox's
    # fence drops it): which comes first is a race of its timer against the model's reply. Either way nothing is sent.
    eventually_blocking(lambda: DROPPED in taker.output() or STOPPED in taker.output(),
                        "the paused worker to stop its turn or drop its late answer", timeout=60)
    eventually_blocking(lambda: inbound(postgres_url) == [("who answers?", "consumed")], "the message consumed")
    quiet_for_blocking(1.0, "a second answer, were one coming, would be here by now")
    assert sent_texts(telegram) == ["answered by the other worker"]


def test_a_killed_workers_task_is_resumed_by_another_from_its_checkpoint_and_delivered_once(
    telegram, models, shared, postgres_url
):
    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "What time is it in UTC?", "label": "clock"}),
                          ToolCall("reply", {"text": "checking"})]),
        model="front",
    )
    models.responder(_voice_echo, model="front")
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {})]),
        Reply(text="never delivered", latency=60),  # the worker running the task dies while it waits for this
        Reply(text="It is 12:00 UTC."),
        model="back",
    )
    pool = shared(2, BICAMERAL_MODE="bicameral", BICAMERAL_FRONT_MODEL="openai:front", BICAMERAL_DELIVERY_PAUSE_SCALE=0,
                  BICAMERAL_TASK_RETRY_DELAY_SECONDS=0)
    telegram.user_sends(OWNER, "what time is it?")
    eventually_blocking(lambda: sent_texts(telegram) == ["checking"], "the acknowledgement", timeout=60)
    models.wait_for_requests(2, timeout=60, model="back")  # the task's second step, after its checkpoint
    taker = eventually_blocking(lambda: next((w for w in pool if taken_by(w)), None), "the worker running the task")
    taker.kill()
    eventually_blocking(lambda: len(sent_texts(telegram)) == 2, "the resumed task's result", timeout=90)
    assert sent_texts(telegram) == ["checking", "Here you go: It is 12:00 UTC."]
    resumed = models.requests_for("back")[2]
    assert resumed.tool_results(), "the resumed run starts from the checkpoint, with the finished tool step"
    quiet_for_blocking(1.0, "a second result, were one coming, would be here by now")
    assert len(sent_texts(telegram)) == 2


def test_a_killed_workers_unsent_parts_go_out_from_the_worker_that_takes_its_chat(telegram, models, shared, postgres_url):
    # Two parts, the second after a typing pause of a few seconds; both are recorded (and claimed for a minute by the
    # worker that recorded them) before the first goes out.
    long_reply = "\n\n".join(f"Part {i}: " + ("the findings in some detail, " * 12).strip() for i in range(3))
    models.responder(lambda req: Reply(text=long_reply))
    pool = shared(2, BICAMERAL_DELIVERY_PAUSE_SCALE=1)
    telegram.user_sends(OWNER, "tell me everything")
    # Killed once the first part is out and recorded so (killed before that, it would be sent again: Telegram has no
    # idempotency key), while the second waits out its pause.
    eventually_blocking(lambda: outbox_states(postgres_url) == ["sent", "pending"], "the first part recorded as sent",
                        timeout=60)
    # The worker that ran the turn (another may take and let go of the idle chat meanwhile, with nothing to do).
    taker = eventually_blocking(lambda: next((w for w in pool if "[TX] telegram:" in w.output()), None),
                                "the worker that sent the first part")
    taker.kill()
    assert outbox_states(postgres_url) == ["sent", "pending"], "the second part left before the kill"
    # A worker renews its claims while it lives, each for a lease (3 s here): the dead worker's claim on the unsent part
    # lapses a lease after the part fell due, and the other worker sends it (not a minute after it was recorded).
    eventually_blocking(lambda: len(sent_texts(telegram)) == 2, "the second part, from the other worker", timeout=45)
    assert [text.split(":")[0] for text in sent_texts(telegram)] == ["Part 0", "Part 2"]
    eventually_blocking(lambda: inbound(postgres_url) == [("tell me everything", "consumed")], "the message consumed")
    assert len(models.requests) == 1  # delivered from the outbox, not asked again
    quiet_for_blocking(1.0, "a second copy, were one coming, would be here by now")
    assert len(sent_texts(telegram)) == 2


def outbox_states(url: str) -> list[str]:
    with psycopg.connect(url, connect_timeout=10) as conn:
        return [str(state) for (state,) in conn.execute("SELECT state FROM outbox ORDER BY id").fetchall()]
