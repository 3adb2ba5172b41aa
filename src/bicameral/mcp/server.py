"""Our tool registry served over MCP streamable HTTP on 127.0.0.1, each caller routed to its running turn by token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server

from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

SERVER_NAME = "bicameral"
_PATH = "/mcp"
_NO_TURN = "refused: no turn is running for this caller (it ended or was stopped); wait for the next message"


@dataclass
class ToolBinding:
    """One caller (a CLI worker): the tools it sees, the context of its running turn, an activity hook."""

    registry: ToolRegistry
    # The ToolContext of the caller's running turn, or None between turns.
    context: Callable[[], ToolContext | None]
    # Called with True when a call starts and False when it ends (the worker's liveness clock).
    on_activity: Callable[[bool], None] = lambda started: None
    # Descriptions that read differently for this caller (e.g. "this is how every answer reaches the user").
    descriptions: Mapping[str, str] = field(default_factory=dict)
    # The caller serves the owner's own chat: owner-only tools are listed (each call is still checked).
    is_owner: bool = False


@dataclass(frozen=True)
class Endpoint:
    url: str
    token: str


class _QuietUvicorn(uvicorn.Server):
    """uvicorn embedded in our loop: signals belong to the application, not to this server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class McpToolServer:
    """Serves tools to any number of bound callers; a request without a bound token gets 401."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._host = host
        self._bindings: dict[str, ToolBinding] = {}
        self._server: _QuietUvicorn | None = None
        self._task: asyncio.Task[None] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the MCP server is not started")
        return self._url

    def bind(self, binding: ToolBinding) -> Endpoint:
        """Register a caller; the returned token goes into its MCP config as a bearer token."""
        token = secrets.token_urlsafe(24)
        self._bindings[token] = binding
        return Endpoint(url=self.url, token=token)

    def unbind(self, token: str) -> None:
        self._bindings.pop(token, None)

    async def start(self) -> None:
        if self._task is not None:
            return
        lowlevel = Server(SERVER_NAME, on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        # Stateless JSON: every call stands alone, so a restarted CLI needs no session of ours.
        app = lowlevel.streamable_http_app(
            streamable_http_path=_PATH, stateless_http=True, json_response=True, host=self._host
        )
        config = uvicorn.Config(
            self._guard(app), host=self._host, port=0, log_level="warning", lifespan="on", access_log=False
        )
        self._server = _QuietUvicorn(config)
        self._task = asyncio.create_task(self._server.serve(), name="mcp-server")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises the startup error
                raise RuntimeError("the MCP server stopped during start-up")
            await asyncio.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self._url = f"http://{self._host}:{port}{_PATH}"
        log.info("MCP server listening at %s", self._url)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._task, timeout=5)
        self._server = self._task = None
        self._url = None

    # --- MCP handlers ---

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        binding = self._bindings.get(_token(ctx))
        if binding is None:
            return types.ListToolsResult(tools=[])
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    description=binding.descriptions.get(spec.name, spec.description),
                    input_schema=spec.input_schema,
                )
                for spec in binding.registry.specs(is_owner=binding.is_owner)
            ]
        )

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        binding = self._bindings.get(_token(ctx))
        if binding is None:
            return _result("this MCP caller is not registered", is_error=True)
        turn = binding.context()
        if turn is None:
            return _result(_NO_TURN, is_error=True)
        binding.on_activity(True)
        try:
            result = await binding.registry.execute(params.name, dict(params.arguments or {}), turn)
        finally:
            binding.on_activity(False)
        return _result(result.content, is_error=result.is_error)

    def _guard(self, app: Any) -> Any:
        """Refuse HTTP requests whose bearer token is not bound, before they reach MCP."""
        bindings = self._bindings

        async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                token = _bearer(headers.get(b"authorization", b"").decode("latin-1"))
                if token not in bindings:
                    body = json.dumps({"error": "unknown or missing bearer token"}).encode()
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                        }
                    )
                    await send({"type": "http.response.body", "body": body})
                    return
            await app(scope, receive, send)

        return guarded


def _token(ctx: Any) -> str:
    request = getattr(ctx, "request", None)
    if request is None:
        return ""
    return _bearer(request.headers.get("authorization", ""))


def _bearer(header: str) -> str:
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _result(text: str, *, is_error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)
