"""One external MCP server: started on demand with the official `mcp` client, restarted with backoff, calls bounded."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from bicameral.backoff import backoff_delay
from bicameral.mcp.external import ExternalServer, Resolved, resolve

log = logging.getLogger(__name__)

STDERR_KEPT = 4096  # the last bytes of a server's stderr, for the message when it fails to start
RESULT_CHARS = 16000  # a longer result is cut, with a note saying so (under the registry's own 20000 cut)
_BACKOFF_BASE = 1.0
_BACKOFF_CAP = 60.0


@dataclass(frozen=True)
class RemoteTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool


class PluginFailure(Exception):
    """The server could not be reached or did not answer; the message is a sentence for the model and the owner."""


class _Tail(asyncio.Protocol):
    """Drains a server's stderr as fast as it comes, keeping only the last bytes: a flood never blocks it."""

    def __init__(self) -> None:
        self.kept = b""

    def data_received(self, data: bytes) -> None:
        self.kept = (self.kept + data)[-STDERR_KEPT:]


class RemoteServer:
    """Started on first use (the first listing or call); one task holds the `mcp` session for its whole life."""

    def __init__(
        self,
        server: ExternalServer,
        *,
        lookup: Callable[[str], str | None],
        base_env: dict[str, str],
        start_timeout: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        on_start: Callable[[RemoteServer], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.server = server
        self._on_start = on_start
        self._listed = False  # whether a listing started it (then there is nothing to compare afterwards)
        self._lookup = lookup
        self._base_env = base_env
        self._start_timeout = start_timeout
        self._clock = clock
        self._session: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._starting: asyncio.Lock = asyncio.Lock()
        self._failures = 0  # starts failed in a row
        self._retry_at = 0.0
        self._tail: _Tail | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._background: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self.server.name

    async def list_tools(self) -> list[RemoteTool]:
        self._listed = True
        session = await self._ensure()
        try:
            listed = await asyncio.wait_for(session.list_tools(), self._start_timeout)
        except TimeoutError:
            raise PluginFailure(f"the {self.name} plugin did not list its tools within {self._start_timeout:.0f}s") from None
        except Exception as exc:
            await self._drop()
            raise PluginFailure(f"the {self.name} plugin failed listing its tools ({_short(exc)})") from None
        tools = []
        for tool in listed.tools:
            annotations = tool.annotations
            read_only = bool(annotations is not None and annotations.read_only_hint)
            tools.append(RemoteTool(tool.name, tool.description or "", dict(tool.input_schema or {}), read_only))
        return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """The call's text and whether it is an error; a dead server is restarted first, a hung call cut off."""
        session = await self._ensure()
        timeout = self.server.timeout_seconds
        try:
            result = await asyncio.wait_for(session.call_tool(name, arguments), timeout)
        except TimeoutError:
            raise PluginFailure(f"the {self.name} plugin did not answer within {timeout:.0f}s") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _closed(exc) or self._runner is None or self._runner.done():
                await self._drop()
                raise PluginFailure(f"the {self.name} plugin stopped during the call; it is started again on the next") from None
            return f"the {self.name} plugin refused the call: {_short(exc)}", True
        return _text(result), bool(getattr(result, "is_error", False))

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self._drop()

    # --- the session's life ---

    async def _ensure(self) -> Any:
        if self._session is not None and self._runner is not None and not self._runner.done():
            return self._session
        async with self._starting:
            if self._session is not None and self._runner is not None and not self._runner.done():
                return self._session
            await self._drop()
            wait = self._retry_at - self._clock()
            if wait > 0:
                raise PluginFailure(f"the {self.name} plugin failed to start; it is tried again in {wait:.0f}s")
            try:
                self._session = await self._start()
            except PluginFailure:
                self._failures += 1
                self._retry_at = self._clock() + backoff_delay(_BACKOFF_BASE, _BACKOFF_CAP, self._failures)
                raise
            self._failures = 0
            if self._on_start is not None and not self._listed:
                task = asyncio.create_task(self._on_start(self), name=f"plugin-{self.name}-relist")
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            return self._session

    async def _start(self) -> Any:
        resolved = resolve(self.server, self._lookup)
        if isinstance(resolved, str):
            raise PluginFailure(f"the {self.name} plugin is not started: {resolved}")
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(lambda done: None if done.cancelled() else done.exception())  # read, even if late
        self._ready = ready
        self._closing = asyncio.Event()
        self._runner = asyncio.create_task(self._hold(resolved, ready), name=f"plugin-{self.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self._start_timeout)
        except TimeoutError:
            await self._drop()
            raise PluginFailure(
                f"the {self.name} plugin did not finish starting (MCP initialize) within {self._start_timeout:.0f}s"
                + self._stderr()
            ) from None
        except PluginFailure:
            await self._drop()
            raise

    async def _hold(self, resolved: Resolved, ready: asyncio.Future[Any]) -> None:
        from mcp.client.session import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport(resolved, stack))
                read, write = streams[0], streams[1]
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                if not ready.done():
                    ready.set_result(session)
                await self._closing.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an exception group from the transport's task group, or a start failure
            if not ready.done():
                ready.set_exception(PluginFailure(f"the {self.name} plugin failed to start ({_short(exc)})" + self._stderr()))
            else:
                log.warning("plugin %s stopped: %s", self.name, _short(exc))
        finally:
            if not ready.done():
                ready.set_exception(PluginFailure(f"the {self.name} plugin exited during start-up" + self._stderr()))

    def _transport(self, resolved: Resolved, stack: contextlib.AsyncExitStack) -> Any:
        server = resolved.server
        if server.type == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            read_fd, write_fd = os.pipe()
            errlog = os.fdopen(write_fd, "w")
            stack.callback(errlog.close)
            self._tail = _Tail()
            stack.push_async_callback(self._drain(read_fd, self._tail))
            params = StdioServerParameters(
                command=server.command or "", args=list(resolved.args), env={**self._base_env, **resolved.env}
            )
            return stdio_client(params, errlog=errlog)
        if server.type == "sse":
            from mcp.client.sse import sse_client

            return sse_client(resolved.url or "", headers=resolved.headers, timeout=self._start_timeout)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        client = httpx2.AsyncClient(headers=resolved.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        stack.push_async_callback(client.aclose)
        return streamable_http_client(resolved.url or "", http_client=client)

    def _drain(self, read_fd: int, tail: _Tail) -> Callable[[], Any]:
        """Start reading the pipe now; the returned coroutine function closes it."""
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(read_fd, "rb", buffering=0)
        started = asyncio.ensure_future(loop.connect_read_pipe(lambda: tail, pipe))

        async def close() -> None:
            with contextlib.suppress(Exception):
                transport, _ = await started
                transport.close()
            with contextlib.suppress(OSError):
                pipe.close()

        return close

    def _stderr(self) -> str:
        kept = self._tail.kept.decode("utf-8", "replace").strip() if self._tail is not None else ""
        return f"; its last words: {kept[-300:]}" if kept else ""

    async def _drop(self) -> None:
        runner, self._runner, self._session = self._runner, None, None
        if runner is None:
            return
        self._closing.set()
        if self._ready is not None and not self._ready.done():
            runner.cancel()  # still starting (e.g. a server that never answers initialize): nothing to close politely
        if not runner.done():
            done, _ = await asyncio.wait({runner}, timeout=5)  # stdio: stdin closed, then the process stopped
            if not done:
                runner.cancel()
                await asyncio.wait({runner}, timeout=5)
        if runner.done() and not runner.cancelled():
            runner.exception()  # logged in `_hold` already


def _text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', 'unknown type')}, {len(block.data) * 3 // 4} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource: {resource.uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(str(structured))
    text = "\n".join(parts) or "(no content)"
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + f"\n[cut: the result was {len(text)} characters; the first {RESULT_CHARS} are shown]"
    return text


def _closed(exc: BaseException) -> bool:
    """Whether the connection is gone (the server exited or the stream broke), as opposed to a refused call."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


def _short(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
