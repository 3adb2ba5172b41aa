"""Tools: the sandbox's start-to-exit cost for `true`, 20 chats each running a 1 s command at once, web_fetch on a local page."""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address, ip_network
from pathlib import Path

import httpx

from bench.harness import percentile
from bench.report import Figure
from bicameral.events import Action, ActionResult, Authority, Role
from bicameral.sandbox.runner import Sandbox
from bicameral.sandbox.workspace import sandbox_workspace
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry
from bicameral.tools.shell import RunCommand
from bicameral.tools.web import WebFetch
from bicameral.web.address import AddressPolicy, IPAddress
from bicameral.web.fetch import WebFetcher

_PAGE = (
    "<!doctype html><html><head><title>Bench</title></head><body><nav>Home | About</nav><article>"
    "<h1>A page to read</h1>" + "".join(f"<p>Paragraph {i}: the quick brown fox jumps over the lazy dog.</p>" for i in range(40))
    + "</article><footer>bench</footer></body></html>"
).encode()


@dataclass
class ToolsResult:
    sandbox_why_off: str | None = None
    sandbox_true: list[float] = field(default_factory=list)  # seconds, Sandbox.run("true") start to exit
    chats: int = 0
    makespan: float = 0.0  # seconds until every chat's `sleep 1` through the run tool had returned
    all_ok: bool = False
    fetch: list[float] = field(default_factory=list)  # seconds, web_fetch through the registry
    plain_get: list[float] = field(default_factory=list)  # seconds, a bare httpx GET of the same page

    def figures(self) -> list[Figure]:
        figures: list[Figure] = []
        if self.sandbox_true:
            ms = [s * 1000 for s in self.sandbox_true]
            note = f"{len(ms)} runs of Sandbox.run('true'): bwrap start, limits, namespaces, exit, tree killed"
            figures += [
                Figure("tools", "sandbox `true` start → exit p50", percentile(ms, 50), "ms", note),
                Figure("tools", "sandbox `true` start → exit p99", percentile(ms, 99), "ms"),
                Figure("tools", f"{self.chats} chats × `sleep 1` at once: makespan", self.makespan, "s",
                       "through the run tool, one command per chat; 1 s is the floor" + ("" if self.all_ok else "; SOME FAILED")),
            ]
        else:
            figures.append(Figure("tools", "sandbox", 0, "", f"not measured: {self.sandbox_why_off}"))
        fetch = [s * 1000 for s in self.fetch]
        plain = percentile([s * 1000 for s in self.plain_get], 50)
        figures += [
            Figure("tools", "web_fetch on a local page p50", percentile(fetch, 50), "ms",
                   f"{len(fetch)} fetches of a {len(_PAGE) // 1024} KiB HTML page: address checks, pinned connection, "
                   f"trafilatura; a bare httpx GET takes {plain:.2f} ms p50"),
            Figure("tools", "web_fetch on a local page p99", percentile(fetch, 99), "ms"),
        ]
        return figures


async def _ok(action: Action) -> ActionResult:
    return ActionResult(ok=True)


@contextmanager
def serving(body: bytes, content_type: str) -> Iterator[int]:
    """A local HTTP server answering every GET with `body`; yields its port."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as two writes: with Nagle on, the client's delayed ACK adds ~40 ms to each.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


async def loopback(host: str, port: int) -> list[IPAddress]:
    """Every name resolves to 127.0.0.1: the bench's local page stands in for the web."""
    return [ip_address("127.0.0.1")]


async def _sandbox(result: ToolsResult, runs: int, chats: int, data_dir: Path) -> None:
    sandbox = Sandbox()
    result.sandbox_why_off = await sandbox.unavailable()
    if result.sandbox_why_off:
        return
    workspace = sandbox_workspace(data_dir, "bench:true")
    for _ in range(runs):
        started = time.perf_counter()
        await sandbox.run(workspace, "true")
        result.sandbox_true.append(time.perf_counter() - started)
    registry = ToolRegistry([RunCommand(sandbox)], timeout=60)
    owner = Authority(Role.OWNER)
    contexts = [
        ToolContext(chat=f"bench:{i}", turn_id="t", data_dir=data_dir, perform=_ok, authority=owner) for i in range(chats)
    ]
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(registry.execute("run", {"command": "sleep 1"}, ctx) for ctx in contexts))
    result.makespan = time.perf_counter() - started
    result.chats = chats
    result.all_ok = all(not o.is_error for o in outcomes)


async def _fetch(result: ToolsResult, fetches: int, data_dir: Path) -> None:
    # The bench's own allowance: the fetcher may reach this loopback server, as the tests' local site does.
    fetcher = WebFetcher(policy=AddressPolicy(allowed=(ip_network("127.0.0.1/32"),)), resolve=loopback)
    registry = ToolRegistry([WebFetch(fetcher)], timeout=60)
    ctx = ToolContext(chat="bench:web", turn_id="t", data_dir=data_dir, perform=_ok)
    with serving(_PAGE, "text/html; charset=utf-8") as port:
        url = f"http://bench.test:{port}/page.html"
        await registry.execute("web_fetch", {"url": url}, ctx)  # warm-up: trafilatura loads on the first page
        for _ in range(fetches):
            started = time.perf_counter()
            outcome = await registry.execute("web_fetch", {"url": url}, ctx)
            result.fetch.append(time.perf_counter() - started)
            if outcome.is_error:
                raise RuntimeError(f"web_fetch failed on the local page: {outcome.content}")
        async with httpx.AsyncClient(trust_env=False) as client:
            for _ in range(fetches):
                started = time.perf_counter()
                (await client.get(f"http://127.0.0.1:{port}/page.html")).raise_for_status()
                result.plain_get.append(time.perf_counter() - started)


async def run_tools(runs: int = 30, chats: int = 20, fetches: int = 30) -> ToolsResult:
    result = ToolsResult()
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as tmp:
        await _sandbox(result, runs, chats, Path(tmp))
        await _fetch(result, fetches, Path(tmp))
    return result
