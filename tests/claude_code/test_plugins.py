"""The real Claude Code CLI calls an external MCP server's tool (the npm reference server over stdio) through our own
MCP server and registry: the same name, the same owner-only rule, and the plugin's credentials never reach the CLI."""

from __future__ import annotations

from tests.claude_code.conftest import SEND, main_requests, routed
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.plugins.conftest import everything_stdio, npm_servers, write_plugins  # noqa: F401 (a fixture)
from tests.plugins.test_mcp_plugins import inner

ECHO = "mcp__bicameral__mcp__everything__echo"
GET_ENV = "mcp__bicameral__mcp__everything__get-env"


async def test_the_cli_calls_a_plugin_tool_through_our_registry(
    telegram, models, start_cc_bot, make_settings, npm_servers, monkeypatch  # noqa: F811
):
    monkeypatch.setenv("PLUGIN_CLI_TOKEN", "plugin-secret-4711")
    write_plugins(make_settings(), everything_stdio(npm_servers, env={"THE_TOKEN": "${PLUGIN_CLI_TOKEN}"}))

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(ECHO, {"message": "through the cli"})])
        if "Echo:" in results[0]["content"] and "sent" not in req.last_user_text():
            said = inner(results[0]["content"]).split("\n")[0]  # the CLI appends its own reminders
            return Reply(tool_calls=[ToolCall(SEND, {"text": "got " + said})])
        return Reply(text="done")

    models.responder(routed(decide))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "echo through the cli")
    sent = await telegram.await_sent(OWNER, 1, timeout=60)
    assert sent[0]["text"] == "got Echo: through the cli"
    offered = main_requests(models)[0].tool_names
    assert ECHO in offered and GET_ENV in offered
    assert '<untrusted_content source="mcp:everything">' in main_requests(models)[1].tool_results()[0]["content"]
    # The server got its token from the environment; the CLI never did, nor its MCP config.
    for spec in app.handler.worker_for(f"telegram:{OWNER}").spawns:
        assert "plugin-secret-4711" not in repr(spec.env) and "plugin-secret-4711" not in " ".join(spec.argv)
    rows = app.stores.tool_calls.recent_failures(10, among=100)
    assert rows == []


async def test_a_members_cli_is_not_offered_the_owners_plugin_tool(
    telegram, models, start_cc_bot, make_settings, npm_servers  # noqa: F811
):
    from tests.support.access import write_access

    settings = make_settings()
    write_access(settings, policy="open")
    write_plugins(settings, everything_stdio(npm_servers))

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(ECHO, {"message": "not yours"})])
        if "sent" not in req.last_user_text() and results[0]["content"] and "send_message" not in results[0]["content"]:
            return Reply(tool_calls=[ToolCall(SEND, {"text": "got " + results[0]["content"].split("\n")[0]})])
        return Reply(text="done")

    models.responder(routed(decide))
    await start_cc_bot()
    telegram.user_sends(2002, "echo please")
    sent = await telegram.await_sent(2002, 1, timeout=60)
    assert ECHO not in main_requests(models)[0].tool_names
    # Not listed to this caller, so the CLI itself refuses it (our registry would too: tests/plugins).
    assert f"No such tool available: {ECHO}" in sent[0]["text"]
