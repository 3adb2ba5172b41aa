"""The owner's commands as tools stay offered through every view of the registry the executors use (the back's, the
Claude Code CLI's after plugins.json hides some tools), and not to sub-agents, whose tool set is fixed."""

from __future__ import annotations

from pathlib import Path

from bicameral.commands.registry import Commands, CommandsConfig
from bicameral.mcp.plugins import PluginsConfig, visible_tools
from bicameral.tools.clock import CurrentTime
from bicameral.tools.commands import command_tools
from bicameral.tools.registry import ToolRegistry
from tests.commands.support import SHOUT


async def test_command_tools_survive_the_executors_views_but_not_a_fixed_set(tmp_path: Path) -> None:
    (tmp_path / "shout.py").write_text(SHOUT)
    commands = Commands(CommandsConfig(tmp_path))
    await commands.reload()
    registry = ToolRegistry([CurrentTime()], dynamic=lambda: command_tools(commands))
    assert [s.name for s in registry.specs()] == ["current_time", "cmd_shout"]
    assert [s.name for s in registry.subset(exclude_messaging=True).specs()] == ["current_time", "cmd_shout"]
    hidden = visible_tools(registry, PluginsConfig.model_validate({"builtin_tools_disabled": ["current_time"]}))
    assert [s.name for s in hidden.specs()] == ["cmd_shout"]
    assert [s.name for s in registry.subset(only=["current_time"]).specs()] == ["current_time"]
    assert registry.subset(exclude=["cmd_shout"]).get("cmd_shout") is None
    schema = registry.specs()[1].input_schema
    assert schema["properties"] == {"text": {"type": "string", "description": "what to shout"}}
