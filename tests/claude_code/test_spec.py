"""The locked-down argv, MCP config and environment, and the plugins config that unlocks tool groups."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bicameral.child_env import child_process_env
from bicameral.claude_code.spec import (
    GATED_BUILTINS,
    MCP_TOOL_TIMEOUT_MS,
    LaunchOptions,
    McpEndpoint,
    SpawnSpec,
    assert_safe,
    build_spec,
    child_env,
)
from bicameral.config import Settings
from bicameral.errors import ForbiddenFlagError, PluginsError
from bicameral.mcp.plugins import (
    PluginsConfig,
    ToolGroups,
    load_plugins,
    visible_tools,
)
from bicameral.tools.registry import ToolRegistry

SESSION = "0b6c1e2a-8d1e-4f57-9a51-6a3f7d0e9c11"


def options(tmp_path: Path, **overrides) -> LaunchOptions:
    values = dict(
        binary="claude",
        model="claude-sonnet-4-5",
        effort="medium",
        cwd=tmp_path,
        home=tmp_path / "home",
        system_prompt="You are a test.",
    )
    values.update(overrides)
    return LaunchOptions(**values)


def spec_of(opts: LaunchOptions, **kwargs) -> SpawnSpec:
    """`build_spec` with a fixed MCP endpoint whose config goes to `<cwd>/mcp.json`."""
    endpoint = McpEndpoint(url="http://127.0.0.1:4321/mcp", token="tok-abcdef123456")
    return build_spec(opts, mcp=endpoint, mcp_config_path=opts.cwd / "mcp.json", **kwargs)


def flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_default_argv_is_a_locked_down_stream_json_worker(tmp_path):
    spec = spec_of(options(tmp_path), session_id=SESSION, resume=False)
    argv = spec.argv
    assert argv[:2] == ("claude", "--print")
    assert flag(argv, "--input-format") == "stream-json" and flag(argv, "--output-format") == "stream-json"
    assert "--verbose" in argv and "--strict-mcp-config" in argv
    assert flag(argv, "--model") == "claude-sonnet-4-5" and flag(argv, "--effort") == "medium"
    # No built-in at all by default: the web goes through our web_fetch and its address checks.
    assert flag(argv, "--tools") == ""
    assert flag(argv, "--allowedTools") == "mcp__bicameral"
    assert flag(argv, "--disallowedTools").split(",") == list(GATED_BUILTINS)
    assert set(GATED_BUILTINS) == {
        "Bash", "PowerShell", "Monitor", "Edit", "Write", "Read", "NotebookEdit", "Glob", "Grep", "LSP", "Agent",
        "WebFetch", "WebSearch",
    }
    assert flag(argv, "--permission-prompts") == "none"
    assert flag(argv, "--session-id") == SESSION and "--resume" not in argv
    assert flag(argv, "--append-system-prompt") == "You are a test."
    assert flag(argv, "--mcp-config") == str(tmp_path / "mcp.json")
    assert "--dangerously-skip-permissions" not in argv


def test_resume_passes_the_stored_session(tmp_path):
    spec = spec_of(options(tmp_path), session_id=SESSION, resume=True)
    assert flag(spec.argv, "--resume") == SESSION and "--session-id" not in spec.argv
    assert spec.resume and spec.session_id == SESSION


@pytest.mark.parametrize(
    ("groups", "unlocked"),
    [
        (ToolGroups(bash=True), ("Bash", "PowerShell", "Monitor")),
        (ToolGroups(code=True), ("Edit", "Write", "Read", "NotebookEdit", "Glob", "Grep", "LSP")),
        (ToolGroups(subagents=True), ("Agent",)),
        (ToolGroups(web=True), ("WebFetch", "WebSearch")),
    ],
)
def test_a_tool_group_moves_its_tools_from_the_deny_list_to_the_allow_list(tmp_path, groups, unlocked):
    argv = spec_of(options(tmp_path, tool_groups=groups), session_id=SESSION, resume=False).argv
    denied = flag(argv, "--disallowedTools").split(",")
    allowed = flag(argv, "--allowedTools").split(",")
    available = flag(argv, "--tools").split(",")
    for name in unlocked:
        assert name not in denied and name in allowed and name in available
    assert set(denied) == set(GATED_BUILTINS) - set(unlocked)


def test_all_groups_unlocked_leaves_nothing_to_deny(tmp_path):
    groups = ToolGroups(bash=True, code=True, subagents=True, web=True)
    argv = spec_of(options(tmp_path, tool_groups=groups), session_id=SESSION, resume=False).argv
    assert "--disallowedTools" not in argv
    assert set(GATED_BUILTINS) <= set(flag(argv, "--allowedTools").split(","))


@pytest.mark.parametrize(
    "extra",
    [
        ["--dangerously-skip-permissions"],
        ["--allow-dangerously-skip-permissions"],
        ["--dangerously-skip-permissions=true"],
        ["--permission-mode", "bypassPermissions"],
        ["--permission-mode=bypassPermissions"],
        ["--permission-mode", "BypassPermissions"],
        ["--permission-mode", "acceptEdits"],
        ["--settings", '{"hooks": {}}'],
        ["--setting-sources", "user,project,local"],
        ["--tools", "Bash"],
        ["--allowedTools", "Bash"],
        ["--tools", "WebFetch"],
        ["--allowedTools", "WebSearch"],
        ["--add-dir", "/"],
        ["--mcp-config", '{"mcpServers": {}}'],
        ["--plugin-dir", "/tmp/plugins"],
        ["--agents", "{}"],
        ["--model", "--settings"],
        ["--append-system-prompt"],
        ["a-positional-prompt"],
    ],
)
def test_the_builder_refuses_every_argument_outside_the_allowlist(tmp_path, extra):
    with pytest.raises(ForbiddenFlagError):
        spec_of(options(tmp_path), session_id=SESSION, resume=False, extra_args=extra)


def test_a_locked_group_s_tools_cannot_be_slipped_into_the_tool_lists(tmp_path):
    unlocked = spec_of(options(tmp_path, tool_groups=ToolGroups(bash=True)), session_id=SESSION, resume=False)
    with pytest.raises(ForbiddenFlagError):
        assert_safe(unlocked, ToolGroups())  # built for the owner's chat, checked as anyone else's
    assert_safe(unlocked, ToolGroups(bash=True))


def test_the_spawn_time_check_refuses_a_tampered_spec(tmp_path):
    good = spec_of(options(tmp_path), session_id=SESSION, resume=False)
    tampered = SpawnSpec(
        argv=(*good.argv, "--dangerously-skip-permissions"), env=good.env, cwd=good.cwd, session_id=SESSION, resume=False
    )
    with pytest.raises(ForbiddenFlagError):
        assert_safe(tampered, ToolGroups())
    for env in ({"CLAUDE_CODE_EVEN_MORE_DANGEROUSLY_SKIP_PERMISSIONS": "1"}, {"CLAUDE_CODE_USE_BEDROCK": "1"}):
        bad_env = SpawnSpec(argv=good.argv, env={**good.env, **env}, cwd=good.cwd, session_id=SESSION, resume=False)
        with pytest.raises(ForbiddenFlagError):
            assert_safe(bad_env, ToolGroups())


def test_mcp_config_always_loads_our_server_with_its_token(tmp_path):
    spec = spec_of(options(tmp_path), session_id=SESSION, resume=False)
    config = json.loads(spec.files[tmp_path / "mcp.json"])
    server = config["mcpServers"]["bicameral"]
    assert server == {
        "type": "http",
        "url": "http://127.0.0.1:4321/mcp",
        "headers": {"Authorization": "Bearer tok-abcdef123456"},
        "alwaysLoad": True,
    }
    assert "tok-abcdef123456" not in " ".join(spec.argv)


def test_a_subscription_user_gets_no_api_key_and_no_traffic_switch(tmp_path):
    env = child_env({"PATH": "/usr/bin", "HOME": "/home/u"}, home=tmp_path, api_key=None, base_url=None, oauth_token=None)
    assert env == {
        "PATH": "/usr/bin", "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude"),
        "MCP_TOOL_TIMEOUT": MCP_TOOL_TIMEOUT_MS,  # our own deadlines hold, not the CLI's 60 s
    }


def test_credentials_come_only_from_settings_and_a_base_url_disables_side_traffic(tmp_path):
    base = {
        "PATH": "/usr/bin",
        "ANTHROPIC_API_KEY": "inherited-key-000000",
        "ANTHROPIC_BASE_URL": "http://elsewhere",
        "CLAUDE_CODE_EVEN_MORE_DANGEROUSLY_SKIP_PERMISSIONS": "1",
        "CLAUDE_CODE_OAUTH_TOKEN": "inherited-token",
    }
    env = child_env(base, home=tmp_path, api_key="sk-ant-settings-key", base_url="http://127.0.0.1:9", oauth_token=None)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": str(tmp_path),
        "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude"),
        "MCP_TOOL_TIMEOUT": MCP_TOOL_TIMEOUT_MS,
        "ANTHROPIC_API_KEY": "sk-ant-settings-key",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    with_token = child_env({}, home=tmp_path, api_key=None, base_url=None, oauth_token="sk-ant-oat01-token")
    assert with_token["CLAUDE_CODE_OAUTH_TOKEN"] == "sk-ant-oat01-token"


def test_only_the_allowlist_is_inherited_and_a_proxy_comes_only_from_settings(tmp_path, monkeypatch):
    parent = {
        "PATH": "/usr/bin",
        "LANG": "de_DE.UTF-8",
        "LC_ALL": "de_DE.UTF-8",
        "TZ": "Europe/Berlin",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
        "HOME": "/home/owner",
        "CLAUDE_CONFIG_DIR": "/home/owner/.claude",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "HTTPS_PROXY": "http://parent-proxy:3128",
        "http_proxy": "http://parent-proxy:3128",
        "NODE_OPTIONS": "--require /tmp/evil.js",
        "BICAMERAL_TELEGRAM_TOKEN": "123:abc",
    }
    for key, value in parent.items():
        monkeypatch.setenv(key, value)
    spec = spec_of(options(tmp_path, base_env=child_process_env()), session_id=SESSION, resume=False)
    assert spec.env == {
        "PATH": "/usr/bin",
        "LANG": "de_DE.UTF-8",
        "LC_ALL": "de_DE.UTF-8",
        "TZ": "Europe/Berlin",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
        **{k: v for k, v in os.environ.items() if k in ("TMPDIR", "LANGUAGE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")},
        **{k: v for k, v in os.environ.items() if k.startswith("LC_")},
        "HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "home" / ".claude"),
        "MCP_TOOL_TIMEOUT": MCP_TOOL_TIMEOUT_MS,
    }
    proxied = spec_of(options(tmp_path, proxy="http://configured:3128"), session_id=SESSION, resume=False)
    assert proxied.env["HTTPS_PROXY"] == proxied.env["HTTP_PROXY"] == "http://configured:3128"


def test_no_setting_source_is_loaded(tmp_path):
    argv = spec_of(options(tmp_path), session_id=SESSION, resume=False).argv
    assert flag(argv, "--setting-sources") == ""
    assert "--settings" not in argv


def test_redaction_hides_keys_in_argv_and_env(tmp_path):
    spec = spec_of(
        options(tmp_path, api_key="sk-ant-secret-value-123", system_prompt="key sk-ant-secret-value-123"),
        session_id=SESSION,
        resume=False,
    )
    shown = json.dumps({"argv": spec.redacted_argv(["sk-ant-secret-value-123"]), "env": spec.redacted_env()})
    assert "sk-ant-secret-value-123" not in shown and "[REDACTED:secret]" in shown


# --- plugins.json ---


def test_missing_plugins_file_means_everything_gated_stays_off(tmp_path):
    config = load_plugins(tmp_path / "plugins.json")
    assert config == PluginsConfig() and config.tool_groups.unlocked() == ()


def test_plugins_file_unlocks_groups_and_hides_tools(tmp_path):
    path = tmp_path / "plugins.json"
    path.write_text(json.dumps({"tool_groups": {"bash": True}, "builtin_tools_disabled": ["react"]}))
    config = load_plugins(path)
    assert config.tool_groups.unlocked() == ("bash",)
    registry = visible_tools(ToolRegistry.discover(), config)
    assert "react" not in registry.names() and "send_message" in registry.names()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"tool_groups": {"shell": True}}), "tool_groups.shell"),
        (json.dumps({"tool_groups": {"bash": "yes please"}}), "tool_groups.bash"),
        (json.dumps({"mcpz": []}), "mcpz"),  # a key it does not know
    ],
)
def test_a_broken_plugins_file_is_a_clear_error(tmp_path, content, expected):
    path = tmp_path / "plugins.json"
    path.write_text(content)
    with pytest.raises(PluginsError) as caught:
        load_plugins(path)
    assert str(path) in str(caught.value) and expected in str(caught.value)


def test_hiding_an_unknown_tool_names_the_choices():
    config = PluginsConfig(builtin_tools_disabled=("send_mesage",))
    with pytest.raises(PluginsError, match=r"send_mesage.*available: .*send_message"):
        visible_tools(ToolRegistry.discover(), config)


def test_plugins_path_defaults_to_the_data_dir(tmp_path):
    assert Settings.for_test(tmp_path).resolved_plugins_path == tmp_path / "data" / "plugins.json"
    other = tmp_path / "elsewhere.json"
    assert Settings.for_test(tmp_path, plugins_path=other).resolved_plugins_path == other


def test_versions_older_than_always_load_support_are_refused():
    from bicameral.claude_code.spec import parse_version, too_old

    assert parse_version("2.1.330 (Claude Code)") == (2, 1, 330)
    assert not too_old(parse_version("2.1.330 (Claude Code)")) and not too_old(parse_version("2.1.121"))
    assert too_old(parse_version("2.1.120 (Claude Code)")) and too_old(parse_version("1.0.99"))
    assert parse_version("no idea") is None and not too_old(None)  # unknown: try it rather than refuse
