"""Which chat a model call is for, and whose words caused it: set where a turn or a task step runs, read by the
metering, the spending caps and the model choice."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

# An asyncio task copies the context it is created in, so a call made by anything a turn or a task starts (a
# compaction, a fact extraction, a sub-agent) is counted for the same chat. None: no chat (a check, a test).
current_chat: ContextVar[str | None] = ContextVar("bicameral_current_chat", default=None)


@dataclass
class Spender:
    """Whose words a run carries (person keys), and whether a spending cap refused one of its model calls."""

    people: tuple[str, ...] = ()
    refused: str | None = None  # why, when a cap refused a call (the run then makes no more)
    capped: bool = False  # the run gave up on a cap's refusal (the chamber said so): its messages wait


# The run's spender: one object shared by what the run starts, so a refusal anywhere in it is seen where it runs.
current_spender: ContextVar[Spender | None] = ContextVar("bicameral_current_spender", default=None)


def gave_up_on_cap() -> None:
    """The running turn answered with the cap's sentence instead of an answer: the lanes hold its messages (a call
    refused later, such as a voice pass that falls back to the words as written, holds nothing)."""
    spender = current_spender.get()
    if spender is not None:
        spender.capped = True


def enter(chat: str, people: tuple[str, ...]) -> Spender:
    """Set the chat and the spender of the running asyncio task (a turn's, a task's); returns the spender."""
    current_chat.set(chat)
    spender = Spender(people)
    current_spender.set(spender)
    return spender
