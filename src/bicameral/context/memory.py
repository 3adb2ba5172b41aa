"""Memory in a model call: standing instructions and relevant facts for the prompt, and a task's reach."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from bicameral.events import Authority, Inbound, OwnerId, is_owner, split_chat_key
from bicameral.models.base import Message, TextBlock
from bicameral.store import Stores
from bicameral.store.memory import Memory
from bicameral.store.memory_scopes import Reach, reach_for

log = logging.getLogger(__name__)

OPEN = "<memory>"
CLOSE = "</memory>"
RULES_OPEN = "<instructions>"
# A lookup this quick costs the loop less than a hop to a worker thread and back does.
_INLINE_SECONDS = 0.002


def burst_text(batch: Sequence[Inbound]) -> str:
    """The words a burst is about: its messages and the messages they reply to."""
    parts = []
    for inbound in batch:
        parts.append(inbound.text)
        if inbound.reply_to is not None:
            parts.append(inbound.reply_to.text)
    return "\n".join(parts)


def memory_note(memory: Memory, reach: Reach | None, text: str, budget_tokens: int) -> str | None:
    """The facts most relevant to `text` within the budget, as a block for the prompt; None when there are none."""
    if reach is None or budget_tokens <= 0:
        return None
    try:
        facts = memory.relevant(text, reach.readable, budget_tokens)
    except Exception:  # memory must never cost the user an answer
        log.exception("memory lookup failed; answering without it")
        return None
    if not facts:
        return None
    lines = [f"{OPEN} what you remember that may matter here (use it without being asked; ids for recall/forget):"]
    lines += [f"- [{f.id}] ({reach.describe(f.scope)}) {f.text}" for f in facts]
    lines.append(CLOSE)
    return "\n".join(lines)


def instructions_note(stores: Stores, chat: str) -> str | None:
    """The owner's standing instructions for the chat (global, then this chat's), as a block for the prompt."""
    found = stores.instructions.for_chat(chat)
    if not found:
        return None
    lines = [f"{RULES_OPEN} standing instructions from the owner; follow them:"]
    lines += [f"<{i.where}>\n{i.text}\n</{i.where}>" for i in found]
    lines.append("</instructions>")
    return "\n".join(lines)


async def prompt_note(stores: Stores, reach: Reach | None, chat: str, text: str, budget_tokens: int) -> str | None:
    """Instructions and relevant memories for one model call: rebuilt every time, never stored.

    A small memory is looked up on the event loop: a thread hop costs more than the lookup, and in a burst
    the hops contend for the database with every other chat. Once a lookup took longer (a large memory,
    a slow disk, the first one) they run beside the loop, where tens of milliseconds stall no other chat.
    """

    def build() -> str | None:
        parts = [instructions_note(stores, chat), memory_note(stores.memory, reach, text, budget_tokens)]
        return "\n\n".join(p for p in parts if p) or None

    if stores.memory.last_lookup_seconds < _INLINE_SECONDS:
        return build()
    return await asyncio.to_thread(build)


async def memory_blocks(
    stores: Stores, reach: Reach | None, batch: Sequence[Inbound], budget_tokens: int
) -> list[TextBlock]:
    """The note for a burst as content blocks to lead a user turn (none when there is nothing to say)."""
    note = await prompt_note(stores, reach, batch[-1].chat, burst_text(batch), budget_tokens)
    return [TextBlock(text=note)] if note else []


def task_reach(
    stores: Stores, chat: str, origin_message: str | None, owner_id: OwnerId, authority: Authority | None = None
) -> Reach | None:
    """A back task reaches what the lane that asked for it reaches, and never more than its words' authors may.

    Whose words the task carries decides: one person's task reaches that person's facts (two-chamber groups
    have one lane per person); several people's only what they share there; owner rights only if all are the
    owner. A task stored before authority was kept falls back to the sender of its origin message. A DM task
    has no origin message, but a DM has only one person; a group task without one gets no memory at all.
    """
    origin = stores.messages.inbound_of(chat, origin_message)
    if origin is None or (origin_message is None and not origin.is_private and authority is None):
        return None
    if authority is None:
        return command_reach(origin, personal=True, owner=is_owner(origin, owner_id))
    alone = authority.people[0] if len(authority.people) == 1 else None
    channel, sender_id = split_chat_key(alone) if alone is not None else (origin.channel, None)
    private, personal = origin.is_private, alone is not None
    return reach_for(chat, channel=channel, sender_id=sender_id, private=private, own_lane=personal, owner=authority.is_owner)


def without_memory(messages: list[Message]) -> list[Message]:
    """The transcript without injected memory notes: they are rebuilt each turn, so a forgotten fact stays gone."""
    cleaned = []
    for message in messages:
        if message.role == "user" and any(_is_note(b) for b in message.content):
            kept = [b for b in message.content if not _is_note(b)]
            message = Message(role="user", content=kept or [TextBlock(text="(memory note)")])
        cleaned.append(message)
    return cleaned


def _is_note(block: object) -> bool:
    return isinstance(block, TextBlock) and block.text.startswith((OPEN, RULES_OPEN))


def command_reach(inbound: Inbound, *, personal: bool, owner: bool) -> Reach:
    """The reach of a command, as a turn from the same lane would have it."""
    return reach_for(
        inbound.chat,
        channel=inbound.channel,
        sender_id=inbound.sender.id,
        private=inbound.is_private,
        own_lane=personal,
        owner=owner,
    )
