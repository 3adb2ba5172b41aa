"""ask_user with the real Claude Code CLI as the executor: the CLI's call reaches our tool through our MCP server,
the person presses a button, and the choice is the tool's result the CLI's model sees."""

from __future__ import annotations

from tests.claude_code.conftest import SEND, routed
from tests.conftest import OWNER
from tests.e2e.test_ask_user import _data, _question
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually

ASK = "mcp__bicameral__ask_user"


async def test_the_cli_asks_and_the_pressed_choice_comes_back(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(ASK, {"question": "Tea or coffee?", "choices": ["Tea", "Coffee"]})])
        if "Coffee" in results[-1]["content"] and not any("noted" in r["content"] for r in results):
            # The CLI may append its own reminders to a result: the first line is our tool's.
            return Reply(tool_calls=[ToolCall(SEND, {"text": "noted: " + results[-1]["content"].split("\n")[0]})])
        return Reply(text="done")

    models.responder(routed(decide))
    await start_cc_bot()
    telegram.user_sends(OWNER, "what drink should I have?")
    question = await _question(telegram, OWNER)
    assert question["text"] == "Tea or coffee?"
    telegram.user_presses(OWNER, question["message_id"], _data(telegram, OWNER, question["message_id"], "Coffee"))
    said = await eventually(
        lambda: [m for m in telegram.sent_messages(OWNER) if m["text"].startswith("noted: ")] or None,
        "the CLI's answer with the choice", timeout=60,
    )
    assert said[0]["text"] == "noted: The user chose: Coffee"
