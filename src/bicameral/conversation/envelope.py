"""Inbound batches rendered as `<msg>` envelopes the models read, with the quoted referent."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from bicameral.events import Inbound
from bicameral.markup import escape, quoteattr
from bicameral.models.base import ImageBlock, TextBlock

_QUOTE_CHARS = 500


def envelope(batch: Sequence[Inbound]) -> str:
    """One `<msg>` element per inbound, in arrival order."""
    return "\n".join(_one(inbound) for inbound in batch)


def content_blocks(batch: Sequence[Inbound]) -> list[TextBlock | ImageBlock]:
    """The user turn for a batch: the envelopes, then each photo as an image the model can see."""
    blocks: list[TextBlock | ImageBlock] = [TextBlock(text=envelope(batch))]
    for inbound in batch:
        for attachment in inbound.attachments:
            if attachment.kind == "photo":
                blocks.append(ImageBlock(path=attachment.path, media_type=attachment.mime or "image/jpeg"))
    return blocks


def _one(inbound: Inbound) -> str:
    attrs = {
        "id": inbound.message_id,
        "from": inbound.sender.name,
        "time": datetime.fromtimestamp(inbound.ts, UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if inbound.kind == "edit":
        attrs["edited"] = "true"
    if inbound.kind == "synthetic":
        attrs["source"] = "system"
    if not inbound.is_private:
        attrs["chat"] = inbound.chat_title or inbound.chat
    if inbound.thread_id:
        attrs["thread"] = inbound.thread_id
    if inbound.flags:
        attrs["flags"] = ",".join(inbound.flags)
    head = "<msg " + " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items()) + ">"
    body = []
    if inbound.reply_to is not None:
        quoted = inbound.reply_to
        who = "you" if quoted.from_bot else quoted.sender_name
        text = quoted.text if len(quoted.text) <= _QUOTE_CHARS else quoted.text[:_QUOTE_CHARS] + "…"
        body.append(f"<quote id={quoteattr(quoted.message_id)} from={quoteattr(who)}>{escape(text)}</quote>")
    for attachment in inbound.attachments:
        label = attachment.name or attachment.path.rsplit("/", 1)[-1]
        where = f" workspace_path={quoteattr(attachment.workspace_path)}" if attachment.workspace_path else ""
        body.append(
            f"<attachment kind={quoteattr(attachment.kind)} path={quoteattr(attachment.path)} name={quoteattr(label)}{where}/>"
        )
    body.append(escape(inbound.text))
    return head + "\n".join(body) + "</msg>"
