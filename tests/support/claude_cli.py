"""Install the pinned Claude Code CLI once into `<repo>/.cache/claude-code` and return its binary."""

# `python -m tests.support.claude_cli` installs and prints the path: `scripts/test` runs it before
# pytest, so a fresh CI machine has the CLI before any test needs it.

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

PINNED_VERSION = "2.1.330"
PACKAGE = "@anthropic-ai/claude-code"
REPO = Path(__file__).resolve().parents[2]
PREFIX = REPO / ".cache" / "claude-code"
_PACKAGE_DIR = PREFIX / "node_modules" / "@anthropic-ai" / "claude-code"
BINARY = PREFIX / "node_modules" / ".bin" / "claude"


class ClaudeCliUnavailable(RuntimeError):
    """The CLI could not be installed or does not run; the message says why."""


def installed_version() -> str | None:
    try:
        return json.loads((_PACKAGE_DIR / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def _runs() -> str | None:
    """The binary's `--version` output, or None when it does not run."""
    try:
        done = subprocess.run([str(BINARY), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and PINNED_VERSION in done.stdout else None


def ensure_claude_cli() -> Path:
    """The pinned CLI's binary, installing it with npm only when the cache does not hold it already."""
    if installed_version() == PINNED_VERSION and _runs():
        return BINARY
    npm = shutil.which("npm")
    if npm is None:
        raise ClaudeCliUnavailable("npm is not on PATH; install Node.js to run the Claude Code tests")
    PREFIX.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", f"{PACKAGE}@{PINNED_VERSION}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise ClaudeCliUnavailable(f"`{' '.join(command)}` failed:\n{done.stderr[-2000:]}")
    if not _runs():
        # npm may skip install scripts; the package's own installer puts the native binary in place.
        node = shutil.which("node")
        if node is not None and (_PACKAGE_DIR / "install.cjs").exists():
            subprocess.run([node, "install.cjs"], cwd=_PACKAGE_DIR, capture_output=True, text=True, timeout=300)
    if not _runs():
        raise ClaudeCliUnavailable(f"{BINARY} was installed but `claude --version` does not report {PINNED_VERSION}")
    return BINARY


if __name__ == "__main__":
    try:
        print(ensure_claude_cli())
    except ClaudeCliUnavailable as exc:
        print(f"claude CLI: {exc}", file=sys.stderr)
        sys.exit(1)
