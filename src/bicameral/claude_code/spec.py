"""The locked-down `claude` command line: argv, MCP config and environment, refusing any permission bypass."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bicameral.child_env import child_env_allows, child_process_env
from bicameral.claude_code.stream import preview
from bicameral.errors import ForbiddenFlagError
from bicameral.mcp.plugins import ToolGroups
from bicameral.redaction import REDACTED, Redactor

MCP_SERVER_NAME = "bicameral"
MCP_NAMESPACE = f"mcp__{MCP_SERVER_NAME}"
# How long the CLI waits for one call to our tools, in ms: a day, so our own deadlines are the ones that hold.
MCP_TOOL_TIMEOUT_MS = str(24 * 3600 * 1000)


def our_name(cli_tool_name: str) -> str:
    """The registry's name of a tool the CLI calls through our MCP server (others stay as they are)."""
    return cli_tool_name.removeprefix(f"{MCP_NAMESPACE}__")

# Read-only web access is on by default; everything below is gated by a plugins tool group.
DEFAULT_BUILTINS: tuple[str, ...] = ()
TOOL_GROUPS: Mapping[str, tuple[str, ...]] = {
    "bash": ("Bash", "PowerShell", "Monitor"),
    "code": ("Edit", "Write", "Read", "NotebookEdit", "Glob", "Grep", "LSP"),
    "subagents": ("Agent",),
    "web": ("WebFetch", "WebSearch"),
}
GATED_BUILTINS = tuple(name for names in TOOL_GROUPS.values() for name in names)
FORBIDDEN_FLAGS = ("--dangerously-skip-permissions", "--allow-dangerously-skip-permissions")
# `alwaysLoad` on an MCP server entry (our tools always in context, never behind ToolSearch) needs this.
MIN_VERSION = (2, 1, 121)


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
    """Everything that decides one `claude` process, gathered by `WorkerConfig.for_chat`."""

    binary: str
    model: str
    effort: str
    cwd: Path
    home: Path  # the CLI's private HOME; its config dir (settings, sessions) is `<home>/.claude`
    system_prompt: str = ""
    tool_groups: ToolGroups = field(default_factory=ToolGroups)
    base_env: Mapping[str, str] = field(default_factory=dict)
    api_key: str | None = None
    base_url: str | None = None
    oauth_token: str | None = None
    proxy: str | None = None


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
    """The built-ins the model may use: those of every unlocked group (none by default)."""
    unlocked = [name for group in groups.unlocked() for name in TOOL_GROUPS[group]]
    return DEFAULT_BUILTINS + tuple(unlocked)


def denied_builtins(groups: ToolGroups) -> tuple[str, ...]:
    """Every gated built-in whose group is still locked."""
    unlocked = set(groups.unlocked())
    return tuple(name for group, names in TOOL_GROUPS.items() if group not in unlocked for name in names)


def child_env(
    base: Mapping[str, str],
    *,
    home: Path,
    api_key: str | None,
    base_url: str | None,
    oauth_token: str | None,
    proxy: str | None = None,
) -> dict[str, str]:
    """The child's environment: the allowed part of `base`, its private home, and what the configuration hands it."""
    env = child_process_env(base)
    env["HOME"] = str(home)
    env["CLAUDE_CONFIG_DIR"] = str(home / ".claude")
    # Our registry bounds every call (the tool timeout; ask_user and approvals by their own deadlines). The CLI's own
    # cut (60 s) would leave a call waiting for a person running here while its model is told it timed out.
    env["MCP_TOOL_TIMEOUT"] = MCP_TOOL_TIMEOUT_MS
    # With neither an API key nor a token the CLI falls back to a login stored in its (private) config dir.
    if api_key:
        env["ANTHROPIC_API_KEY"] = api_key
    if oauth_token:
        env["CLAUDE_CODE_OAUTH_TOKEN"] = oauth_token
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
        # A proxy or test server cannot answer telemetry, update and title calls.
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    if proxy:
        env["HTTPS_PROXY"] = env["HTTP_PROXY"] = proxy
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
        # No settings file is read (user, project or local): none of their hooks, permissions or env apply.
        "--setting-sources", "",
    ]
    denied = denied_builtins(groups)
    if denied:
        argv += ["--disallowedTools", ",".join(denied)]
    argv += ["--resume", session_id] if resume else ["--session-id", session_id]
    if options.system_prompt:
        argv += ["--append-system-prompt", options.system_prompt]
    argv += list(extra_args)
    env = child_env(
        options.base_env,
        home=options.home,
        api_key=options.api_key,
        base_url=options.base_url,
        oauth_token=options.oauth_token,
        proxy=options.proxy,
    )
    spec = SpawnSpec(
        argv=tuple(argv),
        env=env,
        cwd=options.cwd,
        session_id=session_id,
        resume=resume,
        files={mcp_config_path: mcp.config()},
    )
    assert_safe(spec, groups)
    return spec


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`2.1.330 (Claude Code)` → (2, 1, 330); None when the text names no version."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def too_old(version: tuple[int, int, int] | None) -> bool:
    return version is not None and version < MIN_VERSION


def assert_safe(spec: SpawnSpec, groups: ToolGroups) -> None:
    """The spawn-time check: every argv entry and environment variable is one we mean to pass."""
    check_argv(spec.argv, groups)
    for key in spec.env:
        if "DANGEROUSLY" in key or not (key in _ENV_SET_BY_US or child_env_allows(key)):
            raise ForbiddenFlagError(f"{key} is refused in the executor's environment")


def check_argv(argv: Sequence[str], groups: ToolGroups) -> None:
    """Raise unless argv is the binary followed only by allowed flags, each once, with allowed values."""
    rules = _value_rules(groups)
    seen: set[str] = set()
    index = 1
    while index < len(argv):
        arg = argv[index]
        name = arg.split("=", 1)[0]
        if name in FORBIDDEN_FLAGS or "bypassPermissions" in arg:
            raise ForbiddenFlagError(f"{preview(arg)} is refused: the executor never bypasses permission checks")
        if arg in seen:
            raise ForbiddenFlagError(f"{arg} is refused: it is given twice")
        if arg in _SWITCHES:
            seen.add(arg)
            index += 1
            continue
        rule = rules.get(arg)
        if rule is None:
            raise ForbiddenFlagError(f"{preview(arg)} is refused: not an argument the executor passes to the CLI")
        value = argv[index + 1] if index + 1 < len(argv) else None
        if value is None or not rule(value):
            raise ForbiddenFlagError(f"{arg} {preview(repr(value))} is refused: not a value the executor passes")
        seen.add(arg)
        index += 2
    if {"--resume", "--session-id"} <= seen:
        raise ForbiddenFlagError("--resume and --session-id are refused together")


_SWITCHES = frozenset({"--print", "--verbose", "--replay-user-messages", "--strict-mcp-config"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\[\]-]*")
_EFFORTS = frozenset({"low", "medium", "high", "max"})
# What `child_env` sets itself; everything else must be inheritable by the config allowlist.
_ENV_SET_BY_US = frozenset(
    "HOME CLAUDE_CONFIG_DIR ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN ANTHROPIC_BASE_URL "
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC HTTPS_PROXY HTTP_PROXY MCP_TOOL_TIMEOUT".split()
)


def _names(value: str) -> set[str]:
    return {name for name in value.split(",") if name}


def _value_rules(groups: ToolGroups) -> dict[str, Callable[[str], bool]]:
    """Each flag that takes a value, with the values it may take for a worker with these tool groups."""
    allowed = set(allowed_builtins(groups))
    return {
        "--input-format": lambda v: v == "stream-json",
        "--output-format": lambda v: v == "stream-json",
        "--model": lambda v: _MODEL.fullmatch(v) is not None,
        "--effort": lambda v: v in _EFFORTS,
        # Our own config file only: an inline JSON document or a second server is refused.
        "--mcp-config": lambda v: v.endswith(".json") and Path(v).is_absolute(),
        "--tools": lambda v: _names(v) <= allowed,
        "--allowedTools": lambda v: _names(v) <= allowed | {MCP_NAMESPACE},
        "--disallowedTools": lambda v: _names(v) <= set(GATED_BUILTINS),
        "--permission-prompts": lambda v: v == "none",
        "--setting-sources": lambda v: v == "",
        "--session-id": lambda v: _UUID.fullmatch(v) is not None,
        "--resume": lambda v: _UUID.fullmatch(v) is not None,
        "--append-system-prompt": lambda v: True,
    }
