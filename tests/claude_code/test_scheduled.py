"""Scheduled tasks with the real Claude Code CLI as the executor: the fire runs on the CLI, the result reaches the chat."""

from __future__ import annotations

import json
import time

import pytest

from bicameral.store import Stores
from tests.claude_code.conftest import MODEL, SEND, cc_overrides, sends
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall

pytestmark = pytest.mark.slow
CHAT = f"telegram:{OWNER}"
CLOCK = "mcp__bicameral__current_time"


def _stored_task(settings, body: str) -> int:
    """A scheduled task (not a text) due now, stored as a previous run left it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = Stores.open(settings.db_path)
    try:
        now = time.time()
        return stores.schedules.create(
            chat=CHAT, creator=CHAT, kind="task", body=body, tz="UTC", now=now, next_due=now - 1, cron="0 7 * * *"
        ).id
    finally:
        stores.close()


def _back(req: Request) -> Reply:
    """The CLI's task conversation: one tool step, then the result; side requests get a short answer."""
    if CLOCK not in req.tool_names or "<task" not in json.dumps(req.messages):
        return Reply(text="ok")
    if req.tool_results():
        return Reply(text="Morning digest: 3 deploys, none failed.")
    return Reply(tool_calls=[ToolCall(CLOCK, {})])


async def test_a_scheduled_task_runs_on_the_cli_back_and_its_result_reaches_the_chat(
    telegram, models, start_bot, make_settings, claude_bin, cli_home
):
    models.script(Reply(tool_calls=[ToolCall("spawn", {"spec": "Summarise this morning's deploys.", "label": "digest"})]),
                  model="front")
    models.responder(lambda req: Reply(text="Here you go: " + req.last_user_text()), model="front")
    models.responder(_back, model=MODEL)
    overrides = cc_overrides(claude_bin, models, mode="bicameral", front_model="openai:front", delivery_pause_scale=0)
    schedule_id = _stored_task(make_settings(**overrides), "summarise this morning's deploys")
    app = await start_bot(**overrides)
    sent = await telegram.await_sent(OWNER, 1, timeout=60)
    assert "3 deploys, none failed" in sent[0]["text"] and sent[0]["text"].startswith("Here you go")
    triage = json.dumps(models.requests_for("front")[0].raw, ensure_ascii=False)
    assert "scheduled_task" in triage and "this morning's deploys" in triage
    task = app.tasks.for_chat(CHAT)[0]
    assert task.state.value == "completed" and task.spec == "Summarise this morning's deploys."
    assert [r["name"] for r in app.stores.tool_calls.recent()] == ["current_time"], "the work ran on the CLI"
    schedule = app.stores.schedules.get(schedule_id)
    assert schedule is not None and schedule.state == "active" and schedule.next_due > time.time()


async def test_a_scheduled_task_runs_as_a_cli_turn_in_single_mode(telegram, models, start_cc_bot, make_settings, claude_bin):
    models.responder(sends(lambda req: "Digest: " + ("deploys ok" if "scheduled_task" in req.last_user_text() else "?")))
    _stored_task(make_settings(**cc_overrides(claude_bin, models)), "summarise this morning's deploys")
    await start_cc_bot()
    sent = await telegram.await_sent(OWNER, 1, timeout=60)
    assert sent[0]["text"] == "Digest: deploys ok"


QUICK = dict(schedule_retry_base_seconds=0.05, schedule_retry_cap_seconds=0.2)


def _main_turns(models) -> list[Request]:
    """The requests of our own conversation that carry the scheduled task."""
    return [r for r in models.requests if SEND in r.tool_names and "scheduled_task" in json.dumps(r.messages)]


async def test_a_scheduled_cli_turn_that_fails_once_is_retried_and_its_answer_arrives(
    telegram, models, start_cc_bot, make_settings, claude_bin
):
    # The pinned CLI asks twice with a rejected key, then ends its turn: the whole first turn fails.
    failures = [Reply(error_status=401, error_message="invalid x-api-key")] * 2
    answer = sends("Digest: deploys ok")

    def decide(req: Request) -> Reply | str:
        if SEND in req.tool_names and not req.tool_results() and failures:
            return failures.pop()
        return answer(req)

    models.responder(decide)
    _stored_task(make_settings(**cc_overrides(claude_bin, models, **QUICK)), "summarise this morning's deploys")
    await start_cc_bot(**QUICK)
    sent = await telegram.await_sent(OWNER, 1, timeout=60)
    assert [m["text"] for m in sent] == ["Digest: deploys ok"]
    assert telegram.sent_messages(OWNER) == sent, "no failure was reported for a run that recovered"


async def test_a_scheduled_cli_turn_that_always_fails_is_reported_once_as_not_run(
    telegram, models, start_cc_bot, make_settings, claude_bin
):
    models.responder(lambda req: Reply(error_status=401, error_message="invalid x-api-key") if SEND in req.tool_names
                     else Reply(text="ok"))
    schedule_id = _stored_task(make_settings(**cc_overrides(claude_bin, models, **QUICK)), "check the deploy")
    app = await start_cc_bot(**QUICK, schedule_task_attempts=3)
    [sent] = await telegram.await_sent(OWNER, 1, timeout=60)
    assert sent["text"].startswith(f"Your scheduled task #{schedule_id} didn't run (I tried 3 times). ")
    assert "credentials were rejected" in sent["text"] and "It runs again as planned, next on " in sent["text"]
    assert len(_main_turns(models)) >= 3  # one CLI turn per try
    schedule = app.stores.schedules.get(schedule_id)
    assert schedule is not None and schedule.state == "active"
