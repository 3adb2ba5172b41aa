"""Session hygiene before storage: images become path notes, old turns are trimmed at safe cuts."""

from __future__ import annotations

from bicameral.models.base import Block, ImageBlock, Message, TextBlock, ToolResultBlock


def prepare_for_storage(messages: list[Message], max_messages: int) -> list[Message]:
    """Strip image bytes' references to notes and keep at most `max_messages`, cut at a clean user turn."""
    cleaned = [_without_images(m) for m in messages]
    if len(cleaned) <= max_messages:
        return cleaned
    start = len(cleaned) - max_messages
    while start < len(cleaned) and not _starts_turn(cleaned[start]):
        start += 1
    return cleaned[start:]


def _without_images(message: Message) -> Message:
    if not any(isinstance(b, ImageBlock) for b in message.content):
        return message
    content: list[Block] = [TextBlock(text=f"[image: {b.path}]") if isinstance(b, ImageBlock) else b for b in message.content]
    return Message(role=message.role, content=content)


def _starts_turn(message: Message) -> bool:
    # A user message that answers no tool call can open a transcript without orphaned tool blocks.
    return message.role == "user" and not any(isinstance(b, ToolResultBlock) for b in message.content)
