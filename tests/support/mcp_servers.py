"""Install the pinned reference MCP servers from npm once into `<repo>/.cache/mcp-servers`; return their entry points."""

# `python -m tests.support.mcp_servers` installs and prints the paths: `scripts/test` runs it before pytest, so a
# fresh CI machine has the servers before any plugin test needs them.

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

PINNED = {"@modelcontextprotocol/server-everything": "2026.8.31", "@modelcontextprotocol/server-filesystem": "2026.8.31"}
REPO = Path(__file__).resolve().parents[2]
PREFIX = REPO / ".cache" / "mcp-servers"
EVERYTHING = PREFIX / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = PREFIX / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


class McpServersUnavailable(RuntimeError):
    """The servers could not be installed; the message says why."""


def _installed(package: str) -> str | None:
    try:
        manifest = PREFIX / "node_modules" / package / "package.json"
        return json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def ensure_mcp_servers() -> tuple[Path, Path]:
    """The everything and filesystem servers' `index.js`, installed with npm only when the cache lacks them."""
    if all(_installed(name) == version for name, version in PINNED.items()) and EVERYTHING.exists() and FILESYSTEM.exists():
        return EVERYTHING, FILESYSTEM
    npm = shutil.which("npm")
    if npm is None:
        raise McpServersUnavailable("npm is not on PATH; install Node.js to run the MCP plugin tests")
    PREFIX.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", *(f"{n}@{v}" for n, v in PINNED.items())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not (EVERYTHING.exists() and FILESYSTEM.exists()):
        raise McpServersUnavailable(f"`{' '.join(command)}` failed:\n{done.stderr[-2000:]}")
    return EVERYTHING, FILESYSTEM


if __name__ == "__main__":
    try:
        print(*ensure_mcp_servers(), sep="\n")
    except McpServersUnavailable as exc:
        print(f"MCP servers: {exc}", file=sys.stderr)
        sys.exit(1)
