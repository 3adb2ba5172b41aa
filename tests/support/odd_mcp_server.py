"""A misbehaving MCP server over stdio for the plugin tests: `python -m tests.support.odd_mcp_server MODE`.

Modes: `exit` quits at once; `silent` reads and never answers (not even initialize); `serve` is a working server
with odd tools (a 10 MB result, a name with odd characters, an invalid schema, one that kills the server, one that
hangs), and `flood` is `serve` writing megabytes to stderr all the while.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_OBJECT = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
TOOLS = [
    types.Tool(
        name="echo", description="Says the message back", input_schema=_OBJECT,
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(name="big", description="Returns 10 MB", input_schema={"type": "object"}),
    types.Tool(name="odd name/é!", description="A name no model API takes as is", input_schema={"type": "object"}),
    types.Tool(name="bad_schema", description="Not a schema", input_schema={"type": "object", "properties": {"x": {"type": 9}}}),
    types.Tool(name="die", description="Kills the server", input_schema={"type": "object"}),
    types.Tool(name="hang", description="Never answers", input_schema={"type": "object"}),
    types.Tool(name="pid", description="The server's process id", input_schema={"type": "object"}),
]


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def _list(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def _call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = dict(params.arguments or {})
    if params.name == "echo":
        return _text(f"odd echo: {args.get('message')}")
    if params.name == "big":
        return _text("x" * 10_000_000)
    if params.name == "die":
        os._exit(3)
    if params.name == "hang":
        await anyio.sleep_forever()
    if params.name == "pid":
        return _text(str(os.getpid()))
    return _text(f"called {params.name}")


def _flood() -> None:
    line = ("noise " * 200 + "\n").encode()
    while True:
        os.write(2, line)
        time.sleep(0.0005)


async def _serve() -> None:
    server = Server("odd", on_list_tools=_list, on_call_tool=_call)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(mode: str) -> None:
    if "ODD_STARTS" in os.environ:  # a test counts the starts
        with open(os.environ["ODD_STARTS"], "a", encoding="utf-8") as starts:
            starts.write(f"{os.getpid()}\n")
    if mode == "exit":
        print("odd server: giving up at once", file=sys.stderr)
        sys.exit(1)
    if mode == "silent":
        for _ in sys.stdin:
            pass
        return
    if mode == "flood":
        threading.Thread(target=_flood, daemon=True).start()
    anyio.run(_serve)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "serve")
