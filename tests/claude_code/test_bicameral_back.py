"""Bicameral mode with the real Claude Code CLI as the back chamber."""

from __future__ import annotations

import json

from tests.claude_code.conftest import MODEL, SEND, cc_overrides
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall

CLOCK = "mcp__bicameral__current_time"


def _back(req: Request) -> Reply:
    """The CLI's task conversation: one tool step, then the result; side requests get a short answer."""
    if CLOCK not in req.tool_names or "<task" not in json.dumps(req.messages):
        return Reply(text="ok")
    if req.tool_results():
        return Reply(text="Deploy 4812 went through at 09:12 UTC.")
    return Reply(tool_calls=[ToolCall(CLOCK, {})])


async def test_a_task_runs_on_the_cli_and_comes_back_in_the_front_voice(telegram, models, start_bot, claude_bin, cli_home):
    models.script(
        Reply(tool_calls=[
            ToolCall("spawn", {"spec": "Check if yesterday's deploy went through.", "label": "deploy"}),
            ToolCall("reply", {"text": "on it, checking the deploy"}),
        ]),
        model="front",
    )
    models.responder(lambda req: Reply(text="Here you go: " + req.last_user_text()), model="front")
    models.responder(_back, model=MODEL)
    overrides = cc_overrides(claude_bin, models, mode="bicameral", front_model="openai:front", delivery_pause_scale=0)
    app = await start_bot(**overrides)
    telegram.user_sends(OWNER, "did the deploy go through?")
    sent = await telegram.await_sent(OWNER, 2, timeout=60)
    assert sent[0]["text"] == "on it, checking the deploy"
    assert "4812" in sent[1]["text"] and sent[1]["text"].startswith("Here you go")
    task = app.tasks.for_chat(f"telegram:{OWNER}")[0]
    assert task.state.value == "completed"
    assert [r["name"] for r in app.stores.tool_calls.recent()] == ["current_time"]
    back = [r for r in models.requests if CLOCK in r.tool_names]
    assert back and all(SEND not in r.tool_names for r in back), "the back never gets the messaging tools"


async def test_a_friend_s_task_runs_without_the_tool_groups_the_owner_unlocked(
    telegram, models, start_bot, claude_bin, cli_home, tmp_path
):
    friend = 2002
    data = tmp_path / "data"
    data.mkdir()
    (data / "plugins.json").write_text(json.dumps({"tool_groups": {"bash": True}}))
    (data / "access.json").write_text(json.dumps({"policy": "allowlist", "allowed_users": [friend]}))
    models.responder(lambda req: Reply(text="Here you go: " + req.last_user_text()), model="front")
    models.responder(_back, model=MODEL)
    overrides = cc_overrides(claude_bin, models, mode="bicameral", front_model="openai:front", delivery_pause_scale=0)
    await start_bot(**overrides)
    for chat, user, spec in ((OWNER, OWNER, "Check the owner's deploy."), (friend, friend, "Check Bob's deploy.")):
        models.script(Reply(tool_calls=[ToolCall("spawn", {"spec": spec}), ToolCall("reply", {"text": "on it"})]), model="front")
        telegram.user_sends(chat, "did the deploy go through?", user_id=user, first_name="Bob" if user == friend else "Ada")
        sent = await telegram.await_sent(chat, 2, timeout=60)
        assert "4812" in sent[1]["text"]
    back = [r for r in models.requests if CLOCK in r.tool_names]
    owner_task = [r for r in back if "the owner's deploy" in json.dumps(r.messages)]
    friend_task = [r for r in back if "Bob's deploy" in json.dumps(r.messages)]
    assert owner_task and friend_task
    assert all("Bash" in r.tool_names for r in owner_task)
    assert not any("Bash" in r.tool_names for r in friend_task)
