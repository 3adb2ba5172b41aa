"""External MCP servers from plugins.json's `mcps`, end to end: real servers (the npm reference servers over stdio,
streamable HTTP and SSE, the filesystem server, and a misbehaving one of ours) called through the native executor
by the scripted model, with the owner-only rule, `${VAR}`s, /audit lines, restarts and per-call timeouts."""

from __future__ import annotations

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.plugins.conftest import REPO, everything_stdio, odd_server, write_plugins
from tests.support.access import write_access
from tests.support.chat import until_sent

STRANGER = 2002
UNTRUSTED = '<untrusted_content source="mcp:'
ECHO = ToolCall("mcp__everything__echo", {"message": "hi plugin"})


def calling(calls: dict[str, ToolCall]):
    """A model that makes the call named by a word in the newest message, then says what came back."""

    def respond(req: Request) -> Reply:
        results = req.tool_results()
        if results:
            return Reply(text=f"result: {inner(results[0]['content'])[:400]}")  # an error's reads "ERROR: ..."
        last = req.last_user_text()
        for word, call in calls.items():
            if word in last:
                return Reply(tool_calls=[call])
        return Reply(text="hello")

    return respond


def inner(content: str) -> str:
    """What the server said, out of the untrusted-content wrapper every plugin result comes in."""
    if UNTRUSTED not in content:
        return content
    before, after = content.split(UNTRUSTED, 1)
    body, closed, rest = after.split("\n", 3)[3].rpartition("\n</untrusted_content>")
    assert closed, f"the wrapper is closed: {content[-200:]!r}"
    return before + body + rest


async def _reply(telegram, chat: int, count: int = 1) -> str:
    return (await telegram.await_sent(chat, count, timeout=30))[-1]["text"]


async def test_a_stdio_servers_tool_is_offered_with_its_own_schema_and_called(
    telegram, models, start_bot, make_settings, npm_servers
):
    write_plugins(make_settings(), everything_stdio(npm_servers))
    models.responder(calling({"echo": ECHO}))
    await start_bot()
    telegram.user_sends(OWNER, "echo please")
    assert await _reply(telegram, OWNER) == "result: Echo: hi plugin"
    assert models.requests[1].tool_results()[0]["content"].startswith(f"{UNTRUSTED}everything\">\nThis is what")
    offered = {t["function"]["name"]: t["function"] for t in models.requests[0].tools}
    assert "mcp__everything__get-sum" in offered
    schema = offered["mcp__everything__echo"]["parameters"]
    assert schema["properties"]["message"]["type"] == "string" and schema["required"] == ["message"]


async def test_streamable_http_and_sse_servers_are_called_alike(
    telegram, models, start_bot, make_settings, everything_http
):
    http, sse = everything_http("streamableHttp"), everything_http("sse")
    write_plugins(
        make_settings(),
        {"name": "web1", "type": "http", "url": f"http://127.0.0.1:{http}/mcp", "headers": {"X-Test": "1"}},
        {"name": "web2", "type": "sse", "url": f"http://127.0.0.1:{sse}/sse"},
    )
    models.responder(calling({
        "first": ToolCall("mcp__web1__get-sum", {"a": 2, "b": 3}),
        "second": ToolCall("mcp__web2__echo", {"message": "over sse"}),
    }))
    await start_bot()
    telegram.user_sends(OWNER, "first sum")
    assert await _reply(telegram, OWNER) == "result: The sum of 2 and 3 is 5."
    telegram.user_sends(OWNER, "second echo")
    assert await _reply(telegram, OWNER, 2) == "result: Echo: over sse"


async def test_the_filesystem_server_reads_its_folder(telegram, models, start_bot, make_settings, npm_servers, tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "notes.txt").write_text("plugin notes here", encoding="utf-8")
    fs = {"name": "fs", "command": "node", "args": [str(npm_servers[1]), str(folder)]}
    write_plugins(make_settings(), fs)
    models.responder(calling({"notes": ToolCall("mcp__fs__read_text_file", {"path": str(folder / "notes.txt")})}))
    await start_bot()
    telegram.user_sends(OWNER, "read my notes")
    assert await _reply(telegram, OWNER) == "result: plugin notes here"


async def test_a_plugin_tool_is_the_owners_unless_shared(telegram, models, start_bot, make_settings, npm_servers):
    settings = make_settings()
    write_access(settings, policy="open")
    write_plugins(settings, everything_stdio(npm_servers), everything_stdio(npm_servers, name="open", shared=True))
    models.responder(calling({"shared": ToolCall("mcp__open__echo", {"message": "for all"}), "echo": ECHO}))
    await start_bot()
    telegram.user_sends(STRANGER, "echo please")
    reply = await _reply(telegram, STRANGER)
    offered = models.requests[0].tool_names
    assert "mcp__everything__echo" not in offered and "mcp__open__echo" in offered
    assert reply.startswith("result: ERROR: mcp__everything__echo is only for the owner")
    telegram.user_sends(STRANGER, "shared echo")
    assert await _reply(telegram, STRANGER, 2) == "result: Echo: for all"


async def test_variables_are_filled_at_start_and_an_unset_one_skips_the_server(
    telegram, models, start_bot, make_settings, npm_servers, monkeypatch
):
    monkeypatch.setenv("PLUGIN_TEST_TOKEN", "tok-123")
    monkeypatch.delenv("PLUGIN_TEST_MISSING", raising=False)
    write_plugins(
        make_settings(),
        everything_stdio(npm_servers, env={"THE_TOKEN": "${PLUGIN_TEST_TOKEN}"}),
        everything_stdio(npm_servers, name="ghost", env={"KEY": "${PLUGIN_TEST_MISSING}"}),
    )
    models.responder(calling({"env": ToolCall("mcp__everything__get-env", {})}))
    await start_bot()
    telegram.user_sends(OWNER, "env please")
    reply = await _reply(telegram, OWNER)
    assert reply.startswith("result: ")
    environment = models.requests[1].tool_results()[0]["content"]
    assert '"THE_TOKEN": "tok-123"' in environment
    assert "test-key" not in environment and "BICAMERAL" not in environment, "a clean environment"
    assert "mcp__ghost__echo" not in models.requests[0].tool_names
    telegram.user_sends(OWNER, "/audit")
    audit = await _reply(telegram, OWNER, 2)
    assert "plugin ghost is skipped: PLUGIN_TEST_MISSING is not set" in audit


async def test_bad_entries_and_servers_each_get_a_line_and_the_rest_works(
    telegram, models, start_bot, make_settings, npm_servers, monkeypatch
):
    monkeypatch.setenv("LOOP_A", "${LOOP_B}")
    monkeypatch.setenv("LOOP_B", "${LOOP_A}")
    write_plugins(
        make_settings(),
        everything_stdio(npm_servers, colour="blue"),
        {"name": "nocommand", "args": ["x"]},
        odd_server("exit", name="quitter"),
        odd_server("silent", name="mute"),
        odd_server("flood"),
        everything_stdio(npm_servers, name="loop", env={"A": "${LOOP_A}"}),
        everything_stdio(npm_servers, name="badvar", env={"A": "${1X}"}),
    )
    models.responder(calling({
        "big": ToolCall("mcp__odd__big", {}),
        "odd name": ToolCall("mcp__odd__odd_name___", {}),
        "loop": ToolCall("mcp__loop__get-env", {}),
        "bad args": ToolCall("mcp__odd__echo", {"message": 5}),
    }))
    await start_bot(plugin_start_timeout_seconds=8)  # six servers start at once on a small machine
    telegram.user_sends(OWNER, "/audit")
    audit = await _reply(telegram, OWNER)
    assert "plugin mcps[0] ('everything') is left out: colour: unknown key (known: name, type, command" in audit
    assert "plugin mcps[1] ('nocommand') is left out: a stdio server needs a command" in audit
    assert "plugin quitter is left out: the quitter plugin failed to start" in audit
    assert "its last words: odd server: giving up at once" in audit
    assert "plugin mute is left out: the mute plugin did not finish starting (MCP initialize) within 8s" in audit
    assert "plugin odd's tool 'bad_schema' is left out: its input schema is not valid JSON Schema" in audit
    assert "plugin badvar is skipped: '${1X}' is not a variable name" in audit

    telegram.user_sends(OWNER, "something big")
    await until_sent(telegram, OWNER, "result: " + "x" * 400)
    big = models.requests[1].tool_results()[0]["content"]
    assert len(big) < 17000 and "[cut: the result was 10000000 characters" in big
    telegram.user_sends(OWNER, "the odd name")
    await until_sent(telegram, OWNER, "result: called odd name/é!")
    telegram.user_sends(OWNER, "a loop")
    reply = await _reply(telegram, OWNER, 4)
    assert reply.startswith("result:") and '"A": "${LOOP_B}"' in models.requests[-1].tool_results()[0]["content"]
    telegram.user_sends(OWNER, "bad args")
    assert (await _reply(telegram, OWNER, 5)).startswith("result: ERROR: invalid arguments for mcp__odd__echo: message: 5 is not")
    telegram.user_sends(OWNER, "hi")
    assert await _reply(telegram, OWNER, 6) == "hello"


async def test_a_server_that_dies_is_started_again(telegram, models, start_bot, make_settings):
    write_plugins(make_settings(), odd_server())
    models.responder(calling({"pid": ToolCall("mcp__odd__pid", {}), "die": ToolCall("mcp__odd__die", {})}))
    await start_bot()
    telegram.user_sends(OWNER, "pid?")
    first = await _reply(telegram, OWNER)
    telegram.user_sends(OWNER, "die now")
    assert await _reply(telegram, OWNER, 2) == (
        "result: ERROR: mcp__odd__die failed: the odd plugin stopped during the call; it is started again on the next"
    )
    telegram.user_sends(OWNER, "pid again?")
    again = await _reply(telegram, OWNER, 3)
    assert again.startswith("result: ") and again != first


async def test_a_hanging_call_times_out_while_another_chat_is_answered(telegram, models, start_bot, make_settings):
    settings = make_settings()
    write_access(settings, policy="open")
    write_plugins(settings, odd_server(timeout_seconds=4, shared=True))
    models.responder(calling({"hang": ToolCall("mcp__odd__hang", {}), "echo": ToolCall("mcp__odd__echo", {"message": "m"})}))
    await start_bot()
    telegram.user_sends(OWNER, "hang please")
    telegram.user_sends(STRANGER, "hi")
    assert await _reply(telegram, STRANGER) == "hello"
    assert not telegram.sent_messages(OWNER), "the owner's call still hangs"
    telegram.user_sends(STRANGER, "echo")
    assert await _reply(telegram, STRANGER, 2) == "result: odd echo: m"
    assert not telegram.sent_messages(OWNER), "the same server answers other calls while one hangs"
    assert await _reply(telegram, OWNER) == "result: ERROR: mcp__odd__hang failed: the odd plugin did not answer within 4s"


async def test_doctor_lists_each_plugin_its_transport_whether_it_starts_and_its_tools(make_settings, npm_servers, tmp_path):
    import io

    from rich.console import Console

    from bicameral.doctor import _plugins

    settings = make_settings()
    write_plugins(
        settings,
        everything_stdio(npm_servers),
        odd_server("exit", name="quitter"),
        everything_stdio(npm_servers, name="ghost", env={"KEY": "${PLUGIN_DOCTOR_UNSET}"}),
    )
    check = await _plugins(settings)
    out = io.StringIO()
    Console(file=out, width=300).print(check.detail)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("everything (stdio): starts, ") and lines[0].endswith(" tools")
    assert int(lines[0].split(", ")[1].split()[0]) >= 10
    assert lines[1].startswith("  plugin quitter is left out: the quitter plugin failed to start")
    assert lines[2] == "  plugin ghost is skipped: PLUGIN_DOCTOR_UNSET is not set"
    assert not check.ok and not check.required


async def test_after_a_plugins_answer_a_tool_not_declared_read_only_waits_for_the_owner(
    telegram, models, start_bot, make_settings
):
    write_plugins(make_settings(), odd_server())
    script = iter([
        Reply(tool_calls=[ToolCall("mcp__odd__pid", {})]),  # runs: nothing untrusted read yet
        Reply(tool_calls=[ToolCall("mcp__odd__echo", {"message": "x"})]),  # read-only: runs although tainted
        Reply(tool_calls=[ToolCall("mcp__odd__pid", {})]),  # acts outside after untrusted content: asks
    ])
    models.responder(lambda req: next(script, None) or Reply(text="done: " + inner(req.tool_results()[0]["content"])))
    await start_bot()
    telegram.user_sends(OWNER, "go")
    [asked] = await telegram.await_sent(OWNER, 1, timeout=30)
    assert asked["text"].startswith("Approve this tool call?") and "mcp__odd__pid" in asked["text"]
    assert len(models.requests) == 3 and "odd echo: x" in models.requests[2].tool_results()[0]["content"]
    buttons = dict(telegram.inline_buttons(OWNER, asked["message_id"]))
    telegram.user_presses(OWNER, asked["message_id"], buttons["Deny"])
    reply = (await telegram.await_sent(OWNER, 2, timeout=30))[-1]["text"]
    assert reply.startswith("done: ") and "denied by the owner" in reply


async def test_a_server_whose_tools_are_known_starts_on_first_use(telegram, models, start_bot, make_settings, tmp_path):
    starts = tmp_path / "starts.log"
    settings = make_settings()
    write_plugins(settings, odd_server(env={"PYTHONPATH": str(REPO), "ODD_STARTS": str(starts)}))
    models.responder(calling({"pid": ToolCall("mcp__odd__pid", {})}))
    first = await start_bot()
    assert len(starts.read_text().splitlines()) == 1, "started once, to list its tools"
    await first.stop()
    assert (settings.data_dir / "plugins_tools.json").exists()

    await start_bot()
    assert len(starts.read_text().splitlines()) == 1, "the kept list is offered: nothing started"
    telegram.user_sends(OWNER, "pid?")
    reply = await _reply(telegram, OWNER)
    assert reply.startswith("result: ") and "mcp__odd__pid" in models.requests[0].tool_names
    assert len(starts.read_text().splitlines()) == 2, "started by the call"


async def test_a_two_chamber_task_calls_a_plugin_tool(telegram, models, start_bot, make_settings, npm_servers):
    from tests.support.chat import eventually

    write_plugins(make_settings(), everything_stdio(npm_servers))
    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Echo 'from the back'.", "label": "echo"}),
                          ToolCall("reply", {"text": "on it"})]),
        model="front",
    )
    models.responder(lambda req: Reply(text=req.last_user_text().split("<result>")[-1].split("</result>")[0]), model="front")

    def back(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall("mcp__everything__echo", {"message": "from the back"})])
        return Reply(text="The echo said: " + inner(results[0]["content"]))

    models.responder(back, model="back")
    await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=150)
    telegram.user_sends(OWNER, "echo something from the back")
    await eventually(
        lambda: any("The echo said: Echo: from the back" in m["text"] for m in telegram.sent_messages(OWNER)),
        "the task's result delivered", timeout=30,
    )
    assert "mcp__everything__echo" in models.requests_for("back")[0].tool_names


async def test_ask_before_takes_plugin_tool_names(telegram, models, start_bot, make_settings, npm_servers):
    write_plugins(make_settings(), everything_stdio(npm_servers), ask_before=["mcp__everything__*"])
    models.responder(calling({"echo": ECHO}))
    await start_bot()
    telegram.user_sends(OWNER, "echo please")
    [asked] = await telegram.await_sent(OWNER, 1, timeout=30)
    assert asked["text"].startswith("Approve this tool call?") and "mcp__everything__echo" in asked["text"]
    telegram.user_presses(OWNER, asked["message_id"], dict(telegram.inline_buttons(OWNER, asked["message_id"]))["Approve"])
    assert (await telegram.await_sent(OWNER, 2, timeout=30))[-1]["text"] == "result: Echo: hi plugin"
