"""Which calls wait for the owner: `ask_before` names (with `*`), and tools acting outside once a run read untrusted
content. Every tool declares on its class whether it acts outside and whether its results are untrusted: the table
below fails when a tool is added, so its author has to decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bicameral.errors import PluginsError
from bicameral.events import Authority, Role
from bicameral.mcp.plugins import load_plugins
from bicameral.tools.approvals import AskBefore, why_ask
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.registry import ToolRegistry, discover_tools
from bicameral.tools.web import FetchArgs, WebFetch, asked_for

OWNER = Authority.of(Role.OWNER, ["telegram:1"])
MEMBER = Authority.of(Role.MEMBER, ["telegram:2"])

# name → (acts outside, its results are untrusted). "url": only for a URL not in the run's own words.
DECLARED: dict[str, tuple[bool | str, bool]] = {
    "ask_user": (False, False),
    "browser_back": (False, True),  # only to a page this chat's browser already visited
    "browser_click": (True, True),  # a click can submit a form or follow a link the page chose
    "browser_navigate": ("url", True),  # like web_fetch: its address can carry data out
    "browser_read": (False, True),
    "browser_screenshot": (False, True),  # to this chat only
    "browser_type": (True, True),  # what is typed goes to the site
    "create_command": (True, False),  # code the assistant keeps and runs: a page read earlier must not write it
    "current_time": (False, False),
    "database_query": (False, False),
    "delete_message": (False, False),
    "edit_file": (False, False),
    "edit_message": (False, False),
    "forget": (False, False),
    "history_search": (False, True),
    "instructions_read": (False, False),
    "instructions_undo": (False, False),
    "instructions_write": (False, False),
    "list_commands": (False, False),
    "list_files": (False, False),
    "memory_stats": (False, False),
    "react": (False, False),
    "read_file": (False, False),
    "recall": (False, False),
    "recent_messages": (False, True),
    "record_learning": (False, False),
    "remember": (False, False),
    "remove_command": (True, False),
    "render_html": (False, False),  # an offline page: no network, no file of the user's
    "render_latex": (False, False),
    "reply_to_message": (False, False),
    "rollback_command": (True, False),
    "run": (False, False),  # the sandbox never has the network
    "schedule_cancel": (False, False),
    "schedule_create": (False, False),
    "schedule_edit": (False, False),
    "schedule_list": (False, False),
    "schedule_pause": (False, False),
    "schedule_resume": (False, False),
    "search_files": (False, False),
    "send_file": (False, False),  # to this chat only
    "send_message": (False, False),  # to this chat only
    "send_to_chat": (True, False),
    "skill_list": (False, False),  # the owner's and the shipped skills: theirs, not untrusted content
    "skill_read": (False, False),
    "sub_agent": (False, False),  # its tools go through the same gate; what it read taints the caller
    "web_fetch": ("url", True),
    "web_search": (False, True),  # its query goes only to the configured search service
    "write_file": (False, False),
}


def _ctx(authority: Authority = OWNER, words: str = "", tainted_by: str | None = None) -> ToolContext:
    async def perform(action):  # type: ignore[no-untyped-def]
        raise AssertionError("nothing is sent")

    return ToolContext(
        chat="telegram:1", turn_id="t", data_dir=Path("/nonexistent"), perform=perform, authority=authority,
        words=words, tainted_by=tainted_by,
    )


def test_every_tool_declares_whether_it_acts_outside():
    tools = {tool.name: tool for tool in discover_tools()}
    assert sorted(tools) == sorted(DECLARED), "a tool was added or removed: decide its row in DECLARED"
    for name, tool in tools.items():
        outside, untrusted = DECLARED[name]
        cls = type(tool)
        declared_here = any("acts_outside" in c.__dict__ for c in cls.__mro__ if c is not Tool)
        assert declared_here or outside is False, f"{name} must say acts_outside on its class"
        assert tool.untrusted_results is untrusted, name
        if outside == "url":
            assert tool.acts_outside and type(tool).reaches_out is not Tool.reaches_out, name
        else:
            assert tool.acts_outside is outside, name
            assert type(tool).reaches_out is Tool.reaches_out, f"{name} decides per call: give it a 'url'-like row"


@pytest.mark.parametrize(
    ("patterns", "name", "covered"),
    [
        (["run"], "run", True),
        (["run"], "runner", False),
        (["run"], "rerun", False),
        (["web_*"], "web_fetch", True),
        (["web_*"], "web", False),
        (["*"], "anything", True),
        (["mcp__github__*"], "mcp__github__create_issue", True),
        (["mcp__github__*"], "mcp__gitlab__x", False),
        (["*_file"], "send_file", True),
        (["*_file"], "send_file_now", False),
        (["a.b"], "aXb", False),  # a dot is a dot, not a regex
        ([], "run", False),
    ],
)
def test_ask_before_matches_names_with_a_wildcard(patterns, name, covered):
    assert AskBefore(patterns).covers(name) is covered


@pytest.mark.parametrize("bad", ["", "run now", "x[0]", "a?b", "x" * 201])
def test_a_bad_ask_before_entry_is_refused(bad):
    with pytest.raises(ValueError):
        AskBefore([bad])


def test_plugins_json_reads_ask_before_and_refuses_a_bad_entry(tmp_path):
    path = tmp_path / "plugins.json"
    path.write_text(json.dumps({"ask_before": ["run", "web_fetch", "mcp__github__*"]}), encoding="utf-8")
    assert load_plugins(path).ask_before == ("run", "web_fetch", "mcp__github__*")
    path.write_text(json.dumps({"ask_before": ["run; rm"]}), encoding="utf-8")
    with pytest.raises(PluginsError, match="ask_before"):
        load_plugins(path)


def test_why_ask():
    fetch = WebFetch.__new__(WebFetch)  # the rules read only the class and the arguments
    page = FetchArgs(url="https://a.example/x")
    rules = AskBefore(["web_fetch"])
    assert why_ask(fetch, page, _ctx(), AskBefore()) is None, "the owner's own run, nothing untrusted read"
    assert "ask_before" in (why_ask(fetch, page, _ctx(), rules) or "")
    tainted = _ctx(tainted_by="untrusted content (web_search)")
    assert "untrusted content (web_search)" in (why_ask(fetch, page, tainted, AskBefore()) or "")
    asked = _ctx(words="read https://a.example/x please", tainted_by="untrusted content (web_search)")
    assert why_ask(fetch, page, asked, AskBefore()) is None, "a URL in the run's own words was asked for"
    member = _ctx(MEMBER)
    assert "someone other than the owner" in (why_ask(fetch, page, member, AskBefore()) or "")
    assert why_ask(fetch, page, _ctx(MEMBER, words="https://a.example/x"), AskBefore()) is None


@pytest.mark.parametrize(
    ("url", "words", "asked"),
    [
        ("https://a.example/x", "see https://a.example/x", True),
        ("https://a.example/x/", "see https://a.example/x", True),
        ("https://a.example/x?leak=1", "see https://a.example/x", False),
        ("https://a.example", "https://a.example.evil.com", True),  # a prefix of their words: asked, as written
        ("", "anything", False),
    ],
)
def test_a_url_is_asked_for_when_it_is_in_the_words(url, words, asked):
    assert asked_for(url, words) is asked


async def test_reading_untrusted_results_taints_the_run_and_the_gate_asks_after():
    asked: list[str] = []

    class Gate:
        async def check(self, tool, args, raw_args, ctx):  # type: ignore[no-untyped-def]
            if ctx.untrusted and tool.reaches_out(args, ctx):
                asked.append(tool.name)
                return ToolResult.error("denied by the owner")
            return None

    class Search(Tool[FetchArgs]):
        name = "search_stub"
        args_model = FetchArgs
        untrusted_results = True

        async def run(self, args, ctx):  # type: ignore[no-untyped-def]
            return ToolResult("hits")

    class Outside(Tool[FetchArgs]):
        name = "outside_stub"
        args_model = FetchArgs
        acts_outside = True

        async def run(self, args, ctx):  # type: ignore[no-untyped-def]
            return ToolResult("went out")

    registry = ToolRegistry([Search(), Outside()], approver=Gate())
    ctx = _ctx()
    assert (await registry.execute("outside_stub", {"url": "u"}, ctx)).content == "went out"
    assert (await registry.execute("search_stub", {"url": "u"}, ctx)).content == "hits"
    assert ctx.tainted_by == "untrusted content (search_stub)"
    assert (await registry.execute("outside_stub", {"url": "u"}, ctx)).content == "denied by the owner"
    assert asked == ["outside_stub"]
    view = registry.subset(only=["outside_stub"])
    assert (await view.execute("outside_stub", {"url": "u"}, ctx)).is_error, "a view keeps the gate"
