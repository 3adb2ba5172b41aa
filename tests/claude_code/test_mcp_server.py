"""Our MCP server through the official MCP client over real HTTP: routing by token, refusals, audit."""

from __future__ import annotations

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel

from bicameral.config import Settings
from bicameral.events import Action, ActionResult, Authority, Role, SendText
from bicameral.mcp.server import McpToolServer, ToolBinding
from bicameral.store import Stores
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.registry import ToolRegistry, discover_tools


@pytest.fixture
async def server():
    mcp = McpToolServer()
    await mcp.start()
    yield mcp
    await mcp.stop()


def client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)))


def context(chat: str, settings: Settings, router: list[tuple[str, str]]) -> ToolContext:
    async def perform(action: Action) -> ActionResult:
        assert isinstance(action, SendText)
        router.append((action.chat, action.text))
        return ActionResult(ok=True, message_ids=(str(len(router)),))

    return ToolContext(chat=chat, turn_id=f"turn-{chat}", data_dir=settings.data_dir, perform=perform)


async def test_each_caller_s_calls_run_in_its_own_running_turn(server, tmp_path):
    settings = Settings.for_test(tmp_path)
    stores = Stores.open(tmp_path / "db.sqlite")
    registry = ToolRegistry.discover(audit=stores.tool_calls)
    router: list[tuple[str, str]] = []
    turns = {"a": context("telegram:1", settings, router), "b": context("telegram:2", settings, router)}
    activity: list[bool] = []
    a = server.bind(ToolBinding(registry, lambda: turns["a"], activity.append, {"send_message": "the only way out"}))
    b = server.bind(ToolBinding(registry.subset(only=["send_message"]), lambda: turns["b"]))
    async with client(server.url, a.token) as first, client(server.url, b.token) as second:
        listed = {t.name: t.description for t in (await first.list_tools()).tools}
        # Not the owner's binding: the owner-only tools (files, programs) are not listed.
        assert set(listed) == {spec.name for spec in registry.specs()} and listed["send_message"] == "the only way out"
        assert [t.name for t in (await second.list_tools()).tools] == ["send_message"]
        one = await first.call_tool("send_message", {"text": "hello one"})
        two = await second.call_tool("send_message", {"text": "hello two"})
    assert not one.is_error and one.content[0].text == "sent message_id=1"
    assert not two.is_error and two.content[0].text == "sent message_id=2"
    assert router == [("telegram:1", "hello one"), ("telegram:2", "hello two")]
    assert activity == [True, False]
    rows = stores.tool_calls.recent()
    assert {(r["chat"], r["turn_id"]) for r in rows} == {("telegram:1", "turn-telegram:1"), ("telegram:2", "turn-telegram:2")}
    stores.close()


async def test_between_turns_and_bad_arguments_are_refused_as_tool_errors(server, tmp_path):
    settings = Settings.for_test(tmp_path)
    current: list[ToolContext] = []
    binding = server.bind(ToolBinding(ToolRegistry.discover(), lambda: current[0] if current else None))
    async with client(server.url, binding.token) as mcp:
        idle = await mcp.call_tool("send_message", {"text": "late"})
        assert idle.is_error and "no turn is running" in idle.content[0].text
        current.append(context("telegram:1", settings, []))
        bad = await mcp.call_tool("send_message", {"text": ""})
        assert bad.is_error and "invalid arguments for send_message" in bad.content[0].text
        unknown = await mcp.call_tool("rm_rf", {})
        assert unknown.is_error and "unknown tool 'rm_rf'" in unknown.content[0].text


async def test_a_request_without_a_bound_token_gets_401(server):
    server.bind(ToolBinding(ToolRegistry.discover(), lambda: None))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient() as http:
        missing = await http.post(server.url, json=body, headers=headers)
        wrong = await http.post(server.url, json=body, headers={**headers, "Authorization": "Bearer not-a-token"})
    assert missing.status_code == 401 and wrong.status_code == 401
    unbound = server.bind(ToolBinding(ToolRegistry.discover(), lambda: None))
    server.unbind(unbound.token)
    async with httpx2.AsyncClient() as http:
        gone = await http.post(server.url, json=body, headers={**headers, "Authorization": f"Bearer {unbound.token}"})
    assert gone.status_code == 401


class _PathArgs(BaseModel):
    path: str


class _ReadFile(Tool[_PathArgs]):
    name = "read_file"
    description = "Read a file from the data dir."
    args_model = _PathArgs
    reads_files = True

    async def run(self, args: _PathArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(f"contents of {args.path}")


async def test_an_owner_only_tool_is_neither_listed_for_nor_run_by_another_chat(server, tmp_path):
    settings = Settings.for_test(tmp_path)
    registry = ToolRegistry([*discover_tools(), _ReadFile()])
    owner_turn = context("telegram:1", settings, [])
    owner_turn.authority = Authority(Role.OWNER)
    friend_turn = context("telegram:2", settings, [])
    owner = server.bind(ToolBinding(registry, lambda: owner_turn, is_owner=True))
    friend = server.bind(ToolBinding(registry, lambda: friend_turn))
    async with client(server.url, owner.token) as mine, client(server.url, friend.token) as theirs:
        assert "read_file" in {t.name for t in (await mine.list_tools()).tools}
        listed = {t.name for t in (await theirs.list_tools()).tools}
        assert "read_file" not in listed and "send_message" in listed
        allowed = await mine.call_tool("read_file", {"path": "notes.txt"})
        refused = await theirs.call_tool("read_file", {"path": "notes.txt"})
    assert not allowed.is_error and allowed.content[0].text == "contents of notes.txt"
    assert refused.is_error and "only for the owner" in refused.content[0].text
