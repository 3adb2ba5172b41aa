"""The owner's own commands given the settings: the registry of `<data>/commands`, the workshop, their tools."""

from __future__ import annotations

from typing import Any

from bicameral.commands.registry import Commands, CommandsConfig
from bicameral.commands.trial import trial_sandbox
from bicameral.commands.workshop import Workshop
from bicameral.config import Settings
from bicameral.console.desk import MEMBER_COMMANDS, Console
from bicameral.tools.base import Tool
from bicameral.tools.commands import command_tools, workshop_tools


def commands_config(settings: Settings) -> CommandsConfig:
    """In `<data>/commands`; a call's and the tests' time limits; the sandbox's bubblewrap."""
    return CommandsConfig(
        settings.data_dir / "commands", call_timeout_seconds=settings.command_timeout_seconds, bwrap=settings.sandbox_bwrap,
    )


def owner_made_commands(settings: Settings) -> tuple[Commands, list[Tool[Any]]]:
    """The registry (loaded by `load_beside`, once the console's names are known) and the owner's tools changing it."""
    commands = Commands(commands_config(settings))
    config = commands.config
    workshop = Workshop(commands, trial_sandbox(config.bwrap, wall_seconds=config.test_timeout_seconds))
    return commands, workshop_tools(workshop)


def offered(commands: Commands) -> list[Tool[Any]]:
    """Each loaded command as a tool, as the registry asks for them on every offer."""
    return command_tools(commands)


async def load_beside(commands: Commands, console: Console) -> None:
    """No command may take a built-in command's name (the lanes' and the console's, /start too): then load them."""
    builtin = frozenset(c.name for c in MEMBER_COMMANDS) | {"start"}
    commands.reserved = lambda: builtin | console.names
    await commands.reload()
