"""The real Claude Code CLI reads the web only through our web_fetch: its own WebFetch and WebSearch are off."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from bicameral.tools.web import WebFetch
from tests.claude_code.conftest import SEND, main_requests, routed
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.web.conftest import Site, local_fetcher, serve_site

FETCH = "mcp__bicameral__web_fetch"


@pytest.fixture
def site() -> Iterator[Site]:
    yield from serve_site()


async def test_the_cli_fetches_through_our_tool_and_the_user_gets_the_fact(telegram, models, start_cc_bot, site):
    url = site.url("/page.html")

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(FETCH, {"url": url})])
        found = re.search(r"first lit in (\d{4})", results[0]["content"])
        if found and "<untrusted_content" in results[0]["content"]:
            return Reply(tool_calls=[ToolCall(SEND, {"text": f"It was first lit in {found.group(1)}."})])
        return Reply(text="done")

    models.responder(routed(decide))
    app = await start_cc_bot(extra_tools=[WebFetch(local_fetcher())])
    telegram.user_sends(OWNER, f"when was the lighthouse on {url} first lit?")
    sent = await telegram.await_sent(OWNER, 1, timeout=60)
    assert sent[0]["text"] == "It was first lit in 1874."
    assert FETCH in main_requests(models)[0].tool_names
    # The CLI was started with no built-in tools at all, its own web pair denied outright.
    spawns = app.handler.worker_for(f"telegram:{OWNER}").spawns
    assert spawns
    for spec in spawns:
        argv = list(spec.argv)
        assert argv[argv.index("--tools") + 1] == ""
        assert {"WebFetch", "WebSearch"} <= set(argv[argv.index("--disallowedTools") + 1].split(","))
    assert ("/page.html", f"site.test:{site.port}") in site.seen


async def test_the_cli_searches_through_our_web_search(telegram, models, start_cc_bot):
    from bicameral.tools.web import WebSearch
    from bicameral.web.search import SearchHit

    class Searcher:
        async def search(self, query: str, max_results: int) -> list[SearchHit]:
            return [SearchHit("Nordholm", "https://example.org/nordholm", f"{query}: first lit in 1874")]

    search = "mcp__bicameral__web_search"

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall(search, {"query": "nordholm lighthouse"})])
        found = re.search(r"first lit in (\d{4})", results[0]["content"])
        if found and "<untrusted_content" in results[0]["content"]:
            return Reply(tool_calls=[ToolCall(SEND, {"text": f"Search says {found.group(1)}."})])
        return Reply(text="done")

    models.responder(routed(decide))
    app = await start_cc_bot(extra_tools=[WebSearch(Searcher())])
    telegram.user_sends(OWNER, "when was the nordholm lighthouse first lit?")
    sent = await telegram.await_sent(OWNER, 1, timeout=60)
    assert sent[0]["text"] == "Search says 1874."
    assert search in main_requests(models)[0].tool_names and "WebSearch" not in main_requests(models)[0].tool_names
    for spec in app.handler.worker_for(f"telegram:{OWNER}").spawns:
        argv = list(spec.argv)
        assert "WebSearch" in argv[argv.index("--disallowedTools") + 1].split(",")
