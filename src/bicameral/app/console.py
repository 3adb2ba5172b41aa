"""The owner's commands, each given what it reads or changes."""

from __future__ import annotations

from collections.abc import Callable

from bicameral.console.control import control_commands
from bicameral.console.desk import Console, OwnerCommand


def owner_commands(console: Console, *, stop: Callable[[int], None]) -> list[OwnerCommand]:
    """Every owner command, in the order /help lists them."""
    return [*control_commands(console, stop)]
