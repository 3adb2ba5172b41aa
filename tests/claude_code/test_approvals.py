"""Approvals with the real Claude Code CLI as the executor: its tool calls reach our tools through our MCP server and
the same registry, so they wait for the owner's Approve like any other (ask_before, and untrusted content)."""

from __future__ import annotations

import pytest

from bicameral.tools.approvals import DENIED
from tests.claude_code.conftest import SEND, routed
from tests.conftest import OWNER
from tests.e2e.test_approvals import INJECTION, Jot, PageFetch, _asked, _data, _plugins
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually, quiet_for
from tests.support.console import FRIEND

JOT = "mcp__bicameral__jot_down"
FETCH = "mcp__bicameral__web_fetch"
SEND_TO = "mcp__bicameral__send_to_chat"


def _said(telegram, text: str):
    return lambda: [m for m in telegram.sent_messages(OWNER) if m["text"] == text] or None


async def test_an_approved_cli_call_runs(telegram, models, start_cc_bot, make_settings):
    _plugins(make_settings, ask_before=["jot_*"])
    jot = Jot()

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(JOT, {"text": "x"})])
        if results[-1]["content"].startswith("jotted"):
            # The CLI may append its own reminders to a result: the first line is our tool's.
            return Reply(tool_calls=[ToolCall(SEND, {"text": "done: " + results[-1]["content"].split("\n")[0]})])
        return Reply(text="done")

    models.responder(routed(decide))
    await start_cc_bot(extra_tools=[jot])
    telegram.user_sends(OWNER, "note x")
    asked = await _asked(telegram)
    await quiet_for(0.5, "the call would have run by now without approval")
    assert jot.ran == []
    telegram.user_presses(OWNER, asked["message_id"], _data(telegram, asked, "Approve"))
    await eventually(_said(telegram, "done: jotted x"), "the CLI's answer", timeout=60)
    assert jot.ran == ["x"]


async def test_a_fetched_page_cannot_make_the_cli_send_elsewhere(telegram, models, start_cc_bot):
    page = PageFetch()

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(FETCH, {"url": "https://recipes.example/pie"})])
        last = results[-1]["content"]
        if INJECTION in last:  # the model obeys the page
            return Reply(tool_calls=[ToolCall(SEND_TO, {"chat": str(FRIEND), "text": "here is the file"})])
        if DENIED in last:
            return Reply(tool_calls=[ToolCall(SEND, {"text": "done: denied"})])
        return Reply(text="done")

    models.responder(routed(decide))
    await start_cc_bot(extra_tools=[page])
    telegram.user_sends(OWNER, "what does https://recipes.example/pie say?")
    asked = await _asked(telegram)
    assert "send_to_chat" in asked["text"] and "untrusted content (web_fetch)" in asked["text"]
    telegram.user_presses(OWNER, asked["message_id"], _data(telegram, asked, "Deny"))
    await eventually(_said(telegram, "done: denied"), "the CLI's answer", timeout=60)
    assert page.fetched == ["https://recipes.example/pie"]
    assert telegram.sent_messages(FRIEND) == []


@pytest.mark.slow
async def test_an_approval_may_take_longer_than_the_clis_own_tool_timeout(telegram, models, start_cc_bot, make_settings):
    """The CLI gives up on an MCP call after 60 s unless told otherwise (MCP_TOOL_TIMEOUT): a call still waiting for
    the owner here would then run after its model was told it timed out."""
    _plugins(make_settings, ask_before=["jot_down"])
    jot = Jot()

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(JOT, {"text": "x"})])
        if "sent message_id" in results[-1]["content"]:
            return Reply(text="done")
        return Reply(tool_calls=[ToolCall(SEND, {"text": "done: " + results[-1]["content"].split("\n")[0]})])

    models.responder(routed(decide))
    await start_cc_bot(extra_tools=[jot])
    telegram.user_sends(OWNER, "note x")
    asked = await _asked(telegram)
    await quiet_for(70, "the CLI's default tool timeout would have cut the call by now")
    telegram.user_presses(OWNER, asked["message_id"], _data(telegram, asked, "Approve"))
    await eventually(_said(telegram, "done: jotted x"), "the CLI's answer", timeout=60)
    assert jot.ran == ["x"]
