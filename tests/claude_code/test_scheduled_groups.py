"""Scheduled tasks in a group with the real Claude Code CLI: what the fire causes reaches the group exactly once.

A fire is a synthetic message, not a Telegram one: nothing the assistant sends for it may reply to it.
"""

from __future__ import annotations

import json
import time

import pytest

from bicameral.store import Stores
from tests.claude_code.conftest import MODEL, SEND, cc_overrides
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually

pytestmark = pytest.mark.slow
GROUP = -100450
ANN = 2001
CLOCK = "mcp__bicameral__current_time"


def _stored_task(settings, body: str) -> int:
    """A group's scheduled task due now, set by Ann in her lane, as a previous run left it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = Stores.open(settings.db_path)
    try:
        now = time.time()
        return stores.schedules.create(
            chat=f"telegram:{GROUP}", creator=f"telegram:{ANN}", kind="task", body=body, tz="UTC",
            now=now, next_due=now - 1, cron="0 7 * * *", private=False,
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


def _front(req: Request) -> Reply:
    said = req.last_user_text()
    if "scheduled_task" in said:
        return Reply(tool_calls=[ToolCall("spawn", {"spec": "Summarise this morning's deploys.", "label": "digest"})])
    return Reply(text="Here you go: " + said.split("<result>")[-1].split("</result>")[0].strip())


async def test_a_group_scheduled_task_on_the_cli_back_reaches_the_group_once(
    telegram, models, start_bot, make_settings, claude_bin, cli_home
):
    models.responder(_front, model="front")
    models.responder(_back, model=MODEL)
    overrides = cc_overrides(claude_bin, models, mode="bicameral", front_model="openai:front", delivery_pause_scale=0)
    _stored_task(make_settings(**overrides), "summarise this morning's deploys")
    app = await start_bot(**overrides)
    [sent] = await telegram.await_sent(GROUP, 1, timeout=60)
    assert sent["text"] == "Here you go: Morning digest: 3 deploys, none failed."
    assert sent["params"].get("reply_parameters") is None, "a fire is no message to reply to"
    [task] = app.tasks.for_chat(f"telegram:{GROUP}")
    await eventually(lambda: app.tasks.get(task.id).delivered_at is not None and not app.stores.outbox.pending())
    assert [r["name"] for r in app.stores.tool_calls.recent()] == ["current_time"], "the work ran on the CLI"
    assert [m["text"] for m in telegram.sent_messages(GROUP)] == [sent["text"]], "exactly once"
    assert [c.status for c in telegram.calls_to("sendMessage")] == [200]


async def test_a_group_scheduled_cli_turn_that_fails_is_reported_to_the_group_once(
    telegram, models, start_cc_bot, make_settings, claude_bin
):
    """The chamber's own words (here, that the task didn't run) go out without a reply to the fire."""
    models.responder(lambda req: Reply(error_status=401, error_message="invalid x-api-key") if SEND in req.tool_names
                     else Reply(text="ok"))
    quick = dict(schedule_retry_base_seconds=0.05, schedule_retry_cap_seconds=0.2, schedule_task_attempts=2)
    schedule_id = _stored_task(make_settings(**cc_overrides(claude_bin, models, **quick)), "check the deploy")
    app = await start_cc_bot(**quick)
    [sent] = await telegram.await_sent(GROUP, 1, timeout=60)
    assert sent["text"].startswith(f"Your scheduled task #{schedule_id} didn't run (I tried 2 times). ")
    assert sent["params"].get("reply_parameters") is None
    await eventually(lambda: not app.stores.schedules.pending_fires() and not app.stores.outbox.pending())
    assert len(telegram.sent_messages(GROUP)) == 1
    assert [c.status for c in telegram.calls_to("sendMessage")] == [200]
