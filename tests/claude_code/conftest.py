"""Fixtures for the Claude Code executor: the real CLI (installed once), isolated from ~/.claude, on the fakes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bicameral.app import App
from tests.fakes.model_server import ModelServer, Reply, Request, ToolCall
from tests.support.claude_cli import ClaudeCliUnavailable, ensure_claude_cli

MODEL = "claude-sonnet-4-5"
API_KEY = "sk-ant-api03-testOnlyDummyKeyForTheFakeServer0123456789"
SEND = "mcp__bicameral__send_message"


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The pinned real CLI; on CI a failed install fails the tests instead of skipping them."""
    try:
        return ensure_claude_cli()
    except ClaudeCliUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"the Claude Code CLI is required on CI: {exc}")
        pytest.skip(f"the Claude Code CLI is not available: {exc}")


@pytest.fixture
def cli_home(tmp_path, monkeypatch) -> Path:
    """Our HOME and CLAUDE_CONFIG_DIR under tmp_path (the CLI must not use them), none of the developer's switches."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    for key in list(os.environ):
        if key.startswith(("CLAUDE_CODE_", "ANTHROPIC_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    return home


def cc_overrides(claude_bin: Path, models: ModelServer, **extra: object) -> dict[str, object]:
    """Settings that make the real CLI the single-mode executor, pointed at the scripted model server."""
    values: dict[str, object] = dict(
        mode="single",
        back_model=f"claude-code:{MODEL}",
        claude_bin=str(claude_bin),
        anthropic_base_url=models.url,
        anthropic_api_key=API_KEY,
        debounce_ms=100,
        crash_backoff_base=0.2,
        crash_backoff_cap=1.0,
        liveness_timeout_seconds=60,
        liveness_poll_seconds=0.5,
    )
    values.update(extra)
    return values


@pytest.fixture
async def start_cc_bot(start_bot, claude_bin, cli_home, models):
    """Start an in-process assistant whose executor is the real Claude Code CLI."""

    async def start(**overrides: object) -> App:
        return await start_bot(**cc_overrides(claude_bin, models, **overrides))

    return start


def is_main(req: Request) -> bool:
    """A request of the assistant's own conversation (it offers our MCP tools), not a CLI side request."""
    return SEND in req.tool_names


def main_requests(models: ModelServer) -> list[Request]:
    return [r for r in models.requests if is_main(r)]


def routed(decide: Callable[[Request], Reply | str]) -> Callable[[Request], Reply | str]:
    """A responder: our conversation goes to `decide`, anything else the CLI asks gets a short answer."""

    def respond(req: Request) -> Reply | str:
        return decide(req) if is_main(req) else Reply(text="ok")

    return respond


def sends(text: str | Callable[[Request], str]) -> Callable[[Request], Reply | str]:
    """A model that answers every user turn by calling send_message, then ends with a short word."""

    def decide(req: Request) -> Reply:
        if req.tool_results():
            return Reply(text="sent")
        body = text(req) if callable(text) else text
        return Reply(tool_calls=[ToolCall(SEND, {"text": body})])

    return routed(decide)
