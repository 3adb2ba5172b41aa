"""The owner's own commands given the settings: the registry of `<data>/commands`, the workshop, their tools."""

from __future__ import annotations

import logging
from typing import Any

from bicameral.commands import CommandSpec, Fetch
from bicameral.commands.calls import usage
from bicameral.commands.registry import Commands, CommandsConfig
from bicameral.commands.trial import confinement, trial_sandbox
from bicameral.commands.workshop import Workshop
from bicameral.config import Settings
from bicameral.console.desk import MEMBER_COMMANDS, Console
from bicameral.tools.base import Tool
from bicameral.tools.command_files import workspace_files
from bicameral.tools.commands import command_tools, workshop_tools
from bicameral.web.address import AddressRefused, allowance_policy
from bicameral.web.fetch import FetchFailed, FetchLimits, WebFetcher

log = logging.getLogger(__name__)


def commands_config(settings: Settings) -> CommandsConfig:
    """In `<data>/commands`; a call's and the tests' time limits; the sandbox's bubblewrap."""
    return CommandsConfig(
        settings.data_dir / "commands", call_timeout_seconds=settings.command_timeout_seconds, bwrap=settings.sandbox_bwrap,
    )


def page_text(settings: Settings) -> Fetch:
    """`context.fetch` for a command granted `network`: web_fetch's fetcher (its limits, its address rules and the
    owner's allowances), the page's text as its charset says."""
    limits = FetchLimits(
        max_bytes=settings.web_fetch_max_bytes, timeout_seconds=settings.web_fetch_timeout_seconds,
        max_redirects=settings.web_fetch_max_redirects,
    )
    fetcher = WebFetcher(limits, policy=allowance_policy(settings.web_allow_hosts or ()))

    async def fetch(url: str) -> str:
        try:
            page = await fetcher.fetch(url)
        except (AddressRefused, FetchFailed) as exc:  # a command cannot import these: it catches ValueError
            raise ValueError(str(exc)) from None
        return page.body.decode(page.charset or "utf-8", errors="replace")

    return fetch


def owner_made_commands(settings: Settings) -> tuple[Commands, list[Tool[Any]]]:
    """The registry (loaded by `load_beside`, once the console's names are known) and the owner's tools changing it."""
    commands = Commands(commands_config(settings), fetch=page_text(settings), files=workspace_files(settings.data_dir))
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
    found = await confinement(commands.config.bwrap)
    if isinstance(found, str):
        log.warning("the owner's commands run outside bubblewrap: %s", found)
        commands.unconfined = found
    else:
        commands.confinement = found
    await commands.reload()
    console.more_commands = lambda: [
        (usage(spec).splitlines()[0], spec.description) for spec in sorted(commands.current.commands.values(), key=_name)
    ]


def _name(spec: CommandSpec) -> str:
    return spec.name
