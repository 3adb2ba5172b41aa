"""Memory with the real Claude Code CLI as the executor: injected into its prompt, written through the MCP tools."""

from __future__ import annotations

import json

import pytest

from tests.claude_code.conftest import SEND, is_main, main_requests, routed
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually

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


async def test_a_full_cli_session_flushes_facts_then_compacts_and_carries_on(telegram, models, start_cc_bot):
    summary = "Ada told me her locker number earlier."
    finals: list[Request] = []

    def respond(req: Request) -> Reply:
        said = req.last_user_text()
        if "CRITICAL: Respond with TEXT ONLY" in said:
            return Reply(text=f"<summary>{summary}</summary>")  # the CLI's own /compact asks for the summary
        if not is_main(req):
            return Reply(text="ok")
        if req.tool_results():
            finals.append(req)
            # The first turn ends with a context past the budget; later ones are small.
            return Reply(text="sent", usage=(150_000, 5) if len(finals) == 1 else None)
        if "about to be summarised" in said:
            return Reply(tool_calls=[ToolCall(REMEMBER, {"text": "Ada's locker is number 512", "importance": 0.7})])
        if "what's for lunch" in said:
            return Reply(tool_calls=[ToolCall(SEND, {"text": "Soup."})])
        return Reply(tool_calls=[ToolCall(SEND, {"text": "Noted."})])

    models.responder(respond)
    app = await start_cc_bot(claude_code_compact_tokens=100_000)
    telegram.user_sends(OWNER, "my locker is number 512, by the way")
    await telegram.await_sent(OWNER, 1, timeout=40)
    await eventually(
        lambda: any("CRITICAL: Respond with TEXT ONLY" in r.last_user_text() for r in models.requests),
        "the CLI's own /compact request",
        timeout=40,
    )
    telegram.user_sends(OWNER, "what's for lunch?")
    sent = await telegram.await_sent(OWNER, 2, timeout=60)
    assert [m["text"] for m in sent] == ["Noted.", "Soup."]  # the flush said nothing to the chat

    assert {f.text for f in app.stores.memory.all([f"user:telegram:{OWNER}"])} == {"Ada's locker is number 512"}
    texts = [json.dumps(r.messages) for r in models.requests]
    flushed = next(i for i, t in enumerate(texts) if "about to be summarised" in t)
    compacted = next(i for i, r in enumerate(models.requests) if "CRITICAL: Respond with TEXT ONLY" in r.last_user_text())
    lunch = next(i for i, r in enumerate(models.requests) if "what's for lunch" in r.last_user_text())
    assert flushed < compacted < lunch  # facts first, then the summary, then the conversation goes on
    assert summary in texts[lunch]
    assert "Ada's locker is number 512" in models.requests[lunch].last_user_text()  # the fact still reaches it
