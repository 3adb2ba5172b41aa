"""The network capability: a command the owner granted `network` fetches through web_fetch's rules (a real HTTP server on
loopback, allowed as the owner allows hosts); one not granted it has no fetch, and its code may not ask for it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bicameral.app.commands import page_text
from bicameral.commands import CommandContext
from bicameral.commands.registry import Commands, CommandsConfig
from bicameral.commands.trial import trial_sandbox
from bicameral.commands.workshop import Refused, Workshop
from tests.commands.support import needs_bwrap

CONTEXT = CommandContext(sender_id="7", sender_name="Ann", chat="telegram:7", channel="telegram", is_owner=False)
PEEK = '''from bicameral.commands import command


@command(name="peek", description="First line of a page", params=[("url", str, "the page", True)],
         capabilities=["network"])
async def peek(url: str, context=None) -> str:
    try:
        return (await context.fetch(url)).splitlines()[0]
    except ValueError as refused:
        return f"refused: {refused}"
'''
PEEK_TESTS = '''from bicameral.commands import CommandContext
from peek import peek


async def test_peek():
    async def fake(url):
        return "first\\nsecond"

    context = CommandContext("1", "a", "c", "telegram", True, fetch=fake)
    assert await peek("https://example.org", context=context) == "first"
'''


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"Hello from the page\nmore"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def page() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


async def test_a_granted_command_fetches_under_the_web_rules(tmp_path: Path, page: str, make_settings) -> None:
    (tmp_path / "peek.py").write_text(PEEK)
    (tmp_path / "blind.py").write_text(PEEK.replace("peek", "blind").replace('\n         capabilities=["network"]', ""))
    allowed = Commands(CommandsConfig(tmp_path), fetch=page_text(make_settings(web_allow_hosts=["127.0.0.1/32"])))
    await allowed.reload()
    assert sorted(allowed.current.commands) == ["blind", "peek"]
    assert await allowed.run_typed("peek", page, CONTEXT) == "Hello from the page"
    assert await allowed.run_typed("blind", page, CONTEXT) == (
        "I couldn't finish /blind: the command failed (the owner can find why in the log)."
    ), "not granted: no fetch in its context"
    strict = Commands(CommandsConfig(tmp_path), fetch=page_text(make_settings()))
    await strict.reload()
    refused = await strict.run_typed("peek", page, CONTEXT)
    assert refused.startswith("refused: ") and "127.0.0.1" in refused, "loopback stays refused unless allowed"


async def test_an_unknown_capability_is_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "peek.py").write_text(PEEK.replace('["network"]', '["shell"]'))
    loaded = await Commands(CommandsConfig(tmp_path)).reload()
    assert loaded.commands == {} and "unknown capabilities ['shell']" in loaded.problems[0]


@needs_bwrap
async def test_code_asking_for_a_capability_the_owner_did_not_grant_is_refused(tmp_path: Path) -> None:
    commands = Commands(CommandsConfig(tmp_path / "commands"))
    sandbox = trial_sandbox("bwrap", wall_seconds=60)
    assert not isinstance(sandbox, str)
    workshop = Workshop(commands, sandbox)
    with pytest.raises(Refused, match="asks for network, which the owner has not granted"):
        await workshop.create("peek", "x", PEEK, PEEK_TESTS, "", replace=False)
    done = await workshop.create("peek", "x", PEEK, PEEK_TESTS, "add peek", replace=False, granted=frozenset({"network"}))
    assert "passed its tests" in done.text
