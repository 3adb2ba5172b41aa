"""How a worker is launched and supervised: `WorkerConfig`, filled from Settings by `WorkerConfig.from_settings`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from bicameral.claude_code.capture import capture_dir
from bicameral.claude_code.spec import LaunchOptions
from bicameral.claude_code.workspace import token_dir, workspace
from bicameral.config import Settings
from bicameral.mcp.plugins import ToolGroups


@dataclass(frozen=True)
class WorkerConfig:
    """How to launch and supervise a worker; `WorkerConfig.from_settings` fills it from Settings."""

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
    def from_settings(
        cls,
        settings: Settings,
        *,
        chat: str,
        for_owner: bool,
        system_prompt: str,
        tool_groups: ToolGroups,
        base_env: Mapping[str, str],
        tool_descriptions: Mapping[str, str] | None = None,
    ) -> WorkerConfig:
        """The config for a worker serving `chat`; the unlocked `tool_groups` apply only `for_owner`."""

        def secret(value: SecretStr | None) -> str | None:
            return (value.get_secret_value() or None) if value is not None else None

        data_dir = settings.data_dir.resolve()
        place = workspace(data_dir, chat)
        launch = LaunchOptions(
            binary=settings.claude_bin,
            model=settings.back.model,
            effort=settings.claude_effort,
            cwd=place.cwd,
            home=place.home,
            system_prompt=system_prompt,
            tool_groups=tool_groups if for_owner else ToolGroups(),
            base_env=dict(base_env),
            api_key=secret(settings.anthropic_api_key),
            base_url=settings.anthropic_base_url,
            oauth_token=secret(settings.claude_oauth_token),
            proxy=settings.claude_proxy,
        )
        return cls(
            launch=launch,
            capture_dir=capture_dir(data_dir),
            token_dir=token_dir(data_dir),
            for_owner=for_owner,
            tool_descriptions=dict(tool_descriptions or {}),
            liveness_timeout=settings.liveness_timeout_seconds,
            liveness_poll=settings.liveness_poll_seconds,
            backoff_base=settings.crash_backoff_base,
            backoff_cap=settings.crash_backoff_cap,
            tool_error_max=settings.tool_error_max_count,
            tool_error_window=settings.tool_error_window_seconds,
            secrets=tuple(settings.secret_values()),
        )
