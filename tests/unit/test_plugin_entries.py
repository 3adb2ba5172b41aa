"""plugins.json's `mcps` entries: each checked on its own, `${VAR}`s filled in one pass, tool names and schemas."""

from __future__ import annotations

import pytest

from bicameral.errors import PluginsError
from bicameral.mcp.external import parse_servers, resolve, variables
from bicameral.mcp.plugins import load_plugins


def _one(**entry):
    servers, problems = parse_servers([{"name": "gh", "command": "npx", **entry}])
    return servers, problems


def test_the_seed_shape_is_accepted_and_stdio_is_the_default():
    servers, problems = parse_servers([
        {"name": "github", "command": "npx", "args": ["-y", "x"], "env": {"T": "${GH}"}, "allowed_tools": ["mcp__github"]},
        {"name": "linear", "type": "http", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer ${L}"}},
        {"name": "feed", "type": "sse", "url": "https://x.example/sse", "enabled": True, "shared": True},
        {"name": "off", "command": "x", "enabled": False},
    ])
    assert problems == []
    assert [(s.name, s.type, s.shared) for s in servers] == [("github", "stdio", False), ("linear", "http", False),
                                                              ("feed", "sse", True)]


@pytest.mark.parametrize(("entry", "message"), [
    ({"name": "a", "command": "x", "colour": 1}, "colour: unknown key"),
    ({"name": "a"}, "a stdio server needs a command"),
    ({"name": "a", "type": "http"}, "an http server needs a url"),
    ({"name": "a", "type": "sse", "url": "http://x", "command": "y"}, "command and args are for stdio servers"),
    ({"name": "a", "command": "x", "url": "http://x"}, "url and headers are for http and sse servers"),
    ({"name": "a__b", "command": "x"}, "name: String should match pattern"),
    ({"name": "a b", "command": "x"}, "name: String should match pattern"),
    ({"name": "a", "type": "ws", "url": "x"}, "type: Input should be 'stdio', 'http' or 'sse'"),
    ("not an object", "Input should be a valid dictionary"),
])
def test_a_bad_entry_is_left_out_with_a_line_and_the_rest_kept(entry, message):
    servers, problems = parse_servers([entry, {"name": "good", "command": "x"}])
    assert [s.name for s in servers] == ["good"]
    assert len(problems) == 1 and message in problems[0] and problems[0].startswith("plugin mcps[0]")


def test_a_second_entry_of_the_same_name_is_left_out():
    servers, problems = parse_servers([{"name": "a", "command": "x"}, {"name": "a", "command": "y"}])
    assert [s.command for s in servers] == ["x"] and "already has the name 'a'" in problems[0]


def test_variables_are_filled_once_and_never_expanded_again():
    [server], _ = _one(args=["--t=${TOKEN}"], env={"A": "${LOOP}", "B": "x${TOKEN}y"})
    assert variables(server) == ["TOKEN", "LOOP"]
    values = {"TOKEN": "t1", "LOOP": "${LOOP}"}
    resolved = resolve(server, values.get)
    assert not isinstance(resolved, str)
    assert resolved.args == ("--t=t1",) and resolved.env == {"A": "${LOOP}", "B": "xt1y"}


def test_an_unset_empty_or_misspelt_variable_stops_the_start():
    [server], _ = _one(env={"A": "${ONE}", "B": "${TWO}"})
    assert resolve(server, {"ONE": "1", "TWO": ""}.get) == "TWO is not set"
    assert resolve(server, {}.get) == "ONE, TWO are not set"
    [bad], _ = _one(env={"A": "${1X}"})
    assert "'${1X}' is not a variable name" in str(resolve(bad, {}.get))


def test_plugins_json_keeps_mcps_for_the_entries_own_checks(tmp_path):
    path = tmp_path / "plugins.json"
    path.write_text('{"mcps": [{"name": "a", "command": "x"}, 5]}', encoding="utf-8")
    assert load_plugins(path).mcps == ({"name": "a", "command": "x"}, 5)
    path.write_text('{"mcp": []}', encoding="utf-8")
    with pytest.raises(PluginsError, match="mcp: Extra inputs are not permitted"):
        load_plugins(path)
