"""Real MCP servers for the plugin tests: the npm reference servers (installed once into .cache/) and our odd one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.chat import eventually_blocking
from tests.support.mcp_servers import McpServersUnavailable, ensure_mcp_servers

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def npm_servers() -> tuple[Path, Path]:
    """The everything and filesystem servers' entry points; a machine without npm fails the tests loudly."""
    try:
        return ensure_mcp_servers()
    except McpServersUnavailable as exc:
        pytest.fail(str(exc))


def everything_stdio(npm_servers, **extra) -> dict:
    return {"name": "everything", "command": "node", "args": [str(npm_servers[0]), "stdio"], **extra}


def odd_server(mode: str = "serve", **extra) -> dict:
    """Our misbehaving server; PYTHONPATH lets `-m tests.support...` import from the repo."""
    return {
        "name": "odd",
        "command": sys.executable,
        "args": ["-m", "tests.support.odd_mcp_server", mode],
        "env": {"PYTHONPATH": str(REPO)},
        **extra,
    }


def write_plugins(settings, *mcps: dict, **more) -> None:
    path = settings.resolved_plugins_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcps": list(mcps), **more}), encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def everything_http(npm_servers):
    """Start the everything server over a network transport (`streamableHttp` or `sse`); returns its port."""
    started: list[subprocess.Popen[bytes]] = []

    def start(transport: str) -> int:
        port = _free_port()
        env = {"PATH": os.environ.get("PATH", ""), "PORT": str(port)}
        process = subprocess.Popen(
            ["node", str(npm_servers[0]), transport], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        started.append(process)
        eventually_blocking(lambda: _listening(port), f"the everything server ({transport}) listening", timeout=30)
        return port

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)
