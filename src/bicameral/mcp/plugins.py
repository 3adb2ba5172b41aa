"""The plugins config (`plugins.json`): which gated executor built-ins are unlocked, which of our tools are hidden, and
which ask the owner first (`ask_before`, read in every mode)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bicameral.errors import PluginsError
from bicameral.store.skills import NAME as SKILL_NAME
from bicameral.tools.approvals import AskBefore
from bicameral.tools.registry import ToolRegistry


class ToolGroups(BaseModel):
    """Dangerous Claude Code built-ins, all off unless the owner turns a group on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bash: bool = Field(default=False, description="Bash, PowerShell, Monitor: shell execution")
    code: bool = Field(default=False, description="Edit, Write, Read, NotebookEdit, Glob, Grep, LSP")
    subagents: bool = Field(default=False, description="Agent: sub-agents with their own context")
    # The CLI's own fetch skips our address checks (it reached loopback through numeric spellings); web_fetch is ours.
    web: bool = Field(default=False, description="WebFetch, WebSearch: the CLI's own web access")

    def unlocked(self) -> tuple[str, ...]:
        return tuple(name for name in ("bash", "code", "subagents", "web") if getattr(self, name))


class PluginsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_groups: ToolGroups = ToolGroups()
    builtin_tools_disabled: tuple[str, ...] = ()
    # Tool names (`*` a wildcard) whose every call waits for the owner's approval (tools/approvals.py), in every mode.
    ask_before: tuple[str, ...] = ()
    # External MCP servers (mcp/external.py): each entry is checked on its own, so a bad one is left out, not fatal.
    mcps: tuple[Any, ...] = ()
    # Skills to hide (store/skills.py): neither listed, nor readable, nor run by a schedule.
    skills_disabled: tuple[str, ...] = ()

    @field_validator("ask_before")
    @classmethod
    def _tool_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        AskBefore(value)  # a ValueError names the bad entry
        return value

    @field_validator("skills_disabled")
    @classmethod
    def _skill_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in value if not SKILL_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"{bad[0][:80]!r} is not a skill name (lowercase letters, digits and hyphens)")
        return value


def load_plugins(path: Path) -> PluginsConfig:
    """Read `plugins.json`; a missing file means the locked-down defaults, a broken one is an error."""
    if not path.exists():
        return PluginsConfig()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PluginsError(f"{path} is not valid JSON ({exc}); fix it or delete it for the defaults") from None
    try:
        return PluginsConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in exc.errors()[:5])
        raise PluginsError(f"{path} is invalid: {problems}") from None


def visible_tools(registry: ToolRegistry, config: PluginsConfig) -> ToolRegistry:
    """The registry without the tools the config hides; an unknown name is an error naming the choices."""
    unknown = sorted(set(config.builtin_tools_disabled) - set(registry.names()))
    if unknown:
        raise PluginsError(
            f"builtin_tools_disabled names unknown tools {unknown}; available: {', '.join(registry.names())}"
        )
    return registry.subset(exclude=config.builtin_tools_disabled)  # the owner's commands (`cmd_<name>`) stay offered
