"""Memory with the real Claude Code CLI as the executor: injected into its prompt, written through the MCP tools."""

from __future__ import annotations

import json

import pytest

from tests.claude_code.conftest import SEND, main_requests, routed
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall

pytestmark = pytest.mark.slow
REMEMBER = "mcp__bicameral__remember"


async def test_the_cli_sees_remembered_facts_and_keeps_new_ones_through_mcp(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        done = [r["content"] for r in req.tool_results()]
        if not done:
            return Reply(tool_calls=[ToolCall(REMEMBER, {"text": "Ada's train leaves at 8:15", "importance": 0.6})])
        if any("remembered [" in c for c in done):
            return Reply(tool_calls=[ToolCall(SEND, {"text": "Noted the train."})])
        return Reply(text="sent")

    models.responder(routed(decide))
    app = await start_cc_bot()
    app.stores.memory.remember(f"user:telegram:{OWNER}", "Ada is vegetarian", importance=0.9)
    telegram.user_sends(OWNER, "my train leaves at 8:15, keep that in mind")
    sent = await telegram.await_sent(OWNER, 1, timeout=40)
    assert sent[0]["text"] == "Noted the train."
    first = main_requests(models)[0]
    assert "Ada is vegetarian" in json.dumps(first.messages)
    assert REMEMBER in first.tool_names and "mcp__bicameral__recall" in first.tool_names
    kept = {f.text for f in app.stores.memory.all([f"user:telegram:{OWNER}"])}
    assert kept == {"Ada is vegetarian", "Ada's train leaves at 8:15"}
