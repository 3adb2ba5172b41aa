"""The locked-down `claude` command line: argv, MCP config and environment, refusing any permission bypass."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bicameral.errors import ForbiddenFlagError
from bicameral.mcp.plugins import ToolGroups
from bicameral.redaction import REDACTED, Redactor

MCP_SERVER_NAME = "bicameral"
MCP_NAMESPACE = f"mcp__{MCP_SERVER_NAME}"
# Read-only web access is on by default; everything below is gated by a plugins tool group.
DEFAULT_BUILTINS = ("WebFetch", "WebSearch")
TOOL_GROUPS: Mapping[str, tuple[str, ...]] = {
    "bash": ("Bash", "PowerShell", "Monitor"),
    "code": ("Edit", "Write", "Read", "NotebookEdit", "Glob", "Grep", "LSP"),
    "subagents": ("Agent",),
}
GATED_BUILTINS = tuple(name for names in TOOL_GROUPS.values() for name in names)
FORBIDDEN_FLAGS = ("--dangerously-skip-permissions", "--allow-dangerously-skip-permissions")
# `alwaysLoad` on an MCP server entry (our tools always in context, never behind ToolSearch) needs this.
MIN_VERSION = (2, 1, 121)
_FORBIDDEN_MODES = ("bypassPermissions",)


@dataclass(frozen=True)
class McpEndpoint:
    """Where a worker reaches our MCP server, and the bearer token that names the worker."""

    url: str
    token: str

    def config(self) -> str:
        """The `--mcp-config` document; `alwaysLoad` keeps our tools in context instead of behind ToolSearch."""
        server = {
            "type": "http",
            "url": self.url,
            "headers": {"Authorization": f"Bearer {self.token}"},
            "alwaysLoad": True,
        }
        return json.dumps({"mcpServers": {MCP_SERVER_NAME: server}}, indent=2)


@dataclass(frozen=True)
class LaunchOptions:
    """Everything that decides one `claude` process, gathered from Settings by the caller."""

    binary: str
    model: str
    effort: str
    cwd: Path
    system_prompt: str = ""
    tool_groups: ToolGroups = ToolGroups()
    base_env: Mapping[str, str] = field(default_factory=dict)
    api_key: str | None = None
    base_url: str | None = None
    oauth_token: str | None = None


@dataclass(frozen=True)
class SpawnSpec:
    """A ready-to-run command: argv, environment, working directory and files to write first."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    session_id: str
    resume: bool
    files: Mapping[Path, str] = field(default_factory=dict)

    def redacted_argv(self, secrets: Iterable[str] = ()) -> list[str]:
        """The argv with secret values masked, for logs and capture files."""
        redact = Redactor(secrets)
        return [redact(arg) for arg in self.argv]

    def redacted_env(self, secrets: Iterable[str] = ()) -> dict[str, str]:
        """The environment with credentials masked, for logs and capture files."""
        redact = Redactor(secrets)
        shown = {}
        for key, value in sorted(self.env.items()):
            secret_name = any(word in key for word in ("KEY", "TOKEN", "SECRET", "PASSWORD"))
            shown[key] = REDACTED if secret_name and value else redact(value)
        return shown


def allowed_builtins(groups: ToolGroups) -> tuple[str, ...]:
    """The built-ins the model may use: the web pair plus every unlocked group."""
    unlocked = [name for group in groups.unlocked() for name in TOOL_GROUPS[group]]
    return DEFAULT_BUILTINS + tuple(unlocked)


def denied_builtins(groups: ToolGroups) -> tuple[str, ...]:
    """Every gated built-in whose group is still locked."""
    unlocked = set(groups.unlocked())
    return tuple(name for group, names in TOOL_GROUPS.items() if group not in unlocked for name in names)


def child_env(
    base: Mapping[str, str], *, api_key: str | None, base_url: str | None, oauth_token: str | None
) -> dict[str, str]:
    """The child's environment: the inherited base, credentials only from Settings, no bypass switches."""
    env = {k: v for k, v in base.items() if not k.startswith("ANTHROPIC_") and "DANGEROUSLY" not in k}
    env.pop("CLAUDE_CODE_OAUTH_TOKEN", None)
    # With neither an API key nor a token the CLI falls back to its own login (a subscription).
    if api_key:
        env["ANTHROPIC_API_KEY"] = api_key
    if oauth_token:
        env["CLAUDE_CODE_OAUTH_TOKEN"] = oauth_token
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
        # A proxy or test server cannot answer telemetry, update and title calls.
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    return env


def build_spec(
    options: LaunchOptions,
    *,
    mcp: McpEndpoint,
    mcp_config_path: Path,
    session_id: str,
    resume: bool,
    extra_args: Sequence[str] = (),
) -> SpawnSpec:
    """The argv for a long-lived stream-json worker; `resume` continues `session_id`, else it is created."""
    refuse_bypass(extra_args)
    groups = options.tool_groups
    argv = [
        options.binary,
        "--print",
        "--input-format", "stream-json",
        "--output-format", "stream-json",
        "--verbose",
        # Echo each stdin message when it is consumed: how injected messages are tracked.
        "--replay-user-messages",
        "--model", options.model,
        "--effort", options.effort,
        "--mcp-config", str(mcp_config_path),
        "--strict-mcp-config",
        # --tools limits which built-ins exist at all; the allow and deny lists then settle permissions.
        "--tools", ",".join(allowed_builtins(groups)),
        "--allowedTools", ",".join((MCP_NAMESPACE, *allowed_builtins(groups))),
        # Nobody answers permission prompts: anything not allowed above is denied, never left waiting.
        "--permission-prompts", "none",
    ]
    denied = denied_builtins(groups)
    if denied:
        argv += ["--disallowedTools", ",".join(denied)]
    argv += ["--resume", session_id] if resume else ["--session-id", session_id]
    if options.system_prompt:
        argv += ["--append-system-prompt", options.system_prompt]
    argv += list(extra_args)
    env = child_env(options.base_env, api_key=options.api_key, base_url=options.base_url, oauth_token=options.oauth_token)
    spec = SpawnSpec(
        argv=tuple(argv),
        env=env,
        cwd=options.cwd,
        session_id=session_id,
        resume=resume,
        files={mcp_config_path: mcp.config()},
    )
    assert_safe(spec)
    return spec


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`2.1.330 (Claude Code)` → (2, 1, 330); None when the text names no version."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def too_old(version: tuple[int, int, int] | None) -> bool:
    return version is not None and version < MIN_VERSION


def refuse_bypass(args: Sequence[str]) -> None:
    """Raise if the arguments would switch off the CLI's permission checks."""
    args = list(args)
    for index, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in FORBIDDEN_FLAGS:
            raise ForbiddenFlagError(f"{flag} is refused: the executor never bypasses permission checks")
        if flag == "--permission-mode":
            value = arg.split("=", 1)[1] if "=" in arg else (args[index + 1] if index + 1 < len(args) else "")
            if value in _FORBIDDEN_MODES:
                raise ForbiddenFlagError(f"--permission-mode {value} is refused: it bypasses permission checks")


def assert_safe(spec: SpawnSpec) -> None:
    """The spawn-time check: no bypass flag in argv, no bypass switch in the environment."""
    refuse_bypass(spec.argv)
    for key, value in spec.env.items():
        if "DANGEROUSLY" in key and value:
            raise ForbiddenFlagError(f"{key} is refused in the executor's environment")
