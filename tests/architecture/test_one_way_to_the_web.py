"""Reads the code: tools reach the web only through bicameral.web, which alone opens HTTP connections of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import bicameral

SRC = Path(bicameral.__file__).parent
HTTP_CLIENTS = {"httpx", "httpx2", "httpcore", "aiohttp", "requests", "urllib3", "h11", "h2", "bicameral.net"}
NETWORK_MODULES = HTTP_CLIENTS | {"socket", "http.client", "urllib.request", "websockets"}
# The model adapters and channels speak to their configured services, never to a URL a user or model
# chose; `net` is the httpx set-up they share (proxies included), and checks no address (bicameral.web does that).
MAY_CONNECT = {"web", "models", "channels", "mcp", "net"}


def _network(path: Path, modules: set[str]) -> set[str]:
    return {name for name in _imports(path) if any(name == m or name.startswith(f"{m}.") for m in modules)}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_no_tool_opens_a_connection_itself():
    offenders = []
    for path in sorted((SRC / "tools").rglob("*.py")):
        network = _network(path, NETWORK_MODULES)
        if network:
            offenders.append(f"{path.relative_to(SRC)}: {sorted(network)}")
    assert offenders == [], "tools must fetch through bicameral.web (its address checks), not open connections"


def test_only_the_web_package_and_the_platform_clients_import_http_libraries():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        package = path.relative_to(SRC).parts[0].removesuffix(".py")
        if package in MAY_CONNECT:
            continue
        network = _network(path, HTTP_CLIENTS)
        if network:
            offenders.append(f"{path.relative_to(SRC)}: {sorted(network)}")
    assert offenders == []


def test_web_fetches_never_go_through_the_services_proxies():
    """The proxy variables are for the Bot API and the model APIs; a proxy would resolve names past web's checks."""
    offenders = [
        str(path.relative_to(SRC))
        for path in sorted((SRC / "web").rglob("*.py"))
        if any(name == "bicameral.net" or name.startswith("bicameral.net.") for name in _imports(path))
    ]
    assert offenders == []
