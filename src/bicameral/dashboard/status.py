"""The status page's figures: what the owner's /health, /audit and /cost answer, asked as the web chat's owner."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from bicameral.console.desk import Asked, OwnerCommand, Secret
from bicameral.dashboard.chat import CHAT, WEB
from bicameral.events import Inbound, Sender

SHOWN = (("health", ""), ("audit", ""), ("cost", "day"))  # /health's figures; refused senders, the last backup; cost


async def status_sections(commands: Callable[[], Sequence[OwnerCommand]]) -> list[tuple[str, str]]:
    """(title, text) for each report, run as the console runs it for the owner; a failing one says so."""
    known = {command.name: command for command in commands()}
    sections: list[tuple[str, str]] = []
    for name, argument in SHOWN:
        command = known.get(name)
        if command is None:
            continue
        inbound = Inbound(channel=WEB, chat=CHAT, message_id=f"status-{name}", sender=Sender(id="owner", name="you"),
                          text=f"/{name} {argument}".strip(), ts=time.time(), kind="command")
        try:
            answer = await command.run(Asked(inbound, name, argument))
        except Exception as exc:  # one report that fails leaves the others
            answer = f"/{name} did not answer ({type(exc).__name__})"
        sections.append((command.usage, answer.text if isinstance(answer, Secret) else answer))
    return sections
