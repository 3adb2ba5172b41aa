"""What the Claude Code chamber and executor are given (`ClaudeCodeConfig`), and how one worker is launched and
supervised (`WorkerConfig`, made from it for a chat by `WorkerConfig.for_chat`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bicameral.claude_code.capture import capture_dir
from bicameral.claude_code.spec import LaunchOptions
from bicameral.claude_code.workspace import token_dir, workspace
from bicameral.events import OwnerId
from bicameral.mcp.plugins import ToolGroups
from bicameral.sandbox.artifacts import SendLimits


@dataclass(frozen=True)
class ClaudeCodeConfig:
    """What the Claude Code chamber and executor are given: the CLI, how it logs in and reaches the model, how it
    is supervised, which chats are the owner's, where files live and how many a turn or task may send, how much
    memory a prompt carries."""

    data_dir: Path
    owner_id: OwnerId
    binary: str  # the `claude` CLI
    model: str
    effort: str
    api_key: str | None
    base_url: str | None
    oauth_token: str | None
    proxy: str | None  # handed to the CLI as HTTPS_PROXY/HTTP_PROXY; it inherits none of ours
    plugins_path: Path
    liveness_timeout: float
    liveness_poll: float
    backoff_base: float
    backoff_cap: float
    crash_limit: int
    crash_window_seconds: float
    tool_error_max: int
    tool_error_window: float
    secrets: tuple[str, ...]  # every configured secret, scrubbed from what the CLI's output leaves behind
    memory_inject_tokens: int
    sending: SendLimits


@dataclass(frozen=True)
class WorkerConfig:
    """How to launch and supervise a worker; `WorkerConfig.for_chat` fills it from a `ClaudeCodeConfig`."""

    launch: LaunchOptions
    capture_dir: Path
    token_dir: Path  # where the MCP config with the bearer token goes: outside every CLI working dir
    for_owner: bool = False  # the owner's own chat: owner-only tools are listed
    tool_descriptions: Mapping[str, str] = field(default_factory=dict)
    liveness_timeout: float = 300.0
    liveness_poll: float = 30.0
    backoff_base: float = 2.0
    backoff_cap: float = 64.0
    tool_error_max: int = 3
    tool_error_window: float = 60.0
    secrets: tuple[str, ...] = ()

    @classmethod
    def for_chat(
        cls,
        config: ClaudeCodeConfig,
        *,
        chat: str,
        for_owner: bool,
        system_prompt: str,
        tool_groups: ToolGroups,
        base_env: Mapping[str, str],
        tool_descriptions: Mapping[str, str] | None = None,
    ) -> WorkerConfig:
        """The config for a worker serving `chat`; the unlocked `tool_groups` apply only `for_owner`."""
        data_dir = config.data_dir.resolve()
        place = workspace(data_dir, chat)
        launch = LaunchOptions(
            binary=config.binary,
            model=config.model,
            effort=config.effort,
            cwd=place.cwd,
            home=place.home,
            system_prompt=system_prompt,
            tool_groups=tool_groups if for_owner else ToolGroups(),
            base_env=dict(base_env),
            api_key=config.api_key,
            base_url=config.base_url,
            oauth_token=config.oauth_token,
            proxy=config.proxy,
        )
        return cls(
            launch=launch,
            capture_dir=capture_dir(data_dir),
            token_dir=token_dir(data_dir),
            for_owner=for_owner,
            tool_descriptions=dict(tool_descriptions or {}),
            liveness_timeout=config.liveness_timeout,
            liveness_poll=config.liveness_poll,
            backoff_base=config.backoff_base,
            backoff_cap=config.backoff_cap,
            tool_error_max=config.tool_error_max,
            tool_error_window=config.tool_error_window,
            secrets=config.secrets,
        )
