"""Messaging tools: send, reply, edit, delete and react in the current chat; and the owner's send to another chat."""

from __future__ import annotations

from pydantic import BaseModel, Field

from bicameral.events import ActionResult, DeleteMessage, EditText, React, SendText, chat_key, split_chat_key
from bicameral.tools.base import Tool, ToolContext, ToolResult

_MAX_TEXT = 20000


class SendArgs(BaseModel):
    text: str = Field(min_length=1, max_length=_MAX_TEXT, description="Markdown text to send.")


class SendToArgs(BaseModel):
    chat: str = Field(
        min_length=1, max_length=100, description="The chat to send to: its id (e.g. -1001234 or telegram:-1001234)."
    )
    text: str = Field(min_length=1, max_length=_MAX_TEXT, description="Markdown text to send.")


class ReplyArgs(BaseModel):
    message_id: str = Field(description="Id of the message to reply to (from the <msg id=...> envelope).")
    text: str = Field(min_length=1, max_length=_MAX_TEXT, description="Markdown text of the reply.")


class EditArgs(BaseModel):
    message_id: str = Field(description="Id of a message you sent earlier.")
    text: str = Field(min_length=1, max_length=_MAX_TEXT, description="The new Markdown text.")


class MessageRef(BaseModel):
    message_id: str = Field(description="Id of the message.")


class ReactArgs(BaseModel):
    message_id: str = Field(description="Id of the message to react to.")
    emoji: str = Field(default="👍", max_length=8, description="One emoji, e.g. 👍 ❤️ 👀 🔥 🎉.")


class SendMessage(Tool[SendArgs]):
    name = "send_message"
    description = (
        "Send a message to the current chat right now, before your final answer (e.g. a quick "
        "'on it' before a long task). Your final text is delivered automatically; do not repeat it here."
    )
    args_model = SendArgs
    messaging = True

    async def run(self, args: SendArgs, ctx: ToolContext) -> ToolResult:
        return await _send(ctx, SendText(chat=ctx.chat, text=args.text))


class SendToChat(Tool[SendToArgs]):
    name = "send_to_chat"
    description = (
        "Send a message to another chat (a group or a person's private chat) by its id, for the owner. "
        "For this chat use send_message or your final answer."
    )
    args_model = SendToArgs
    messaging = True
    # It speaks for the owner somewhere else: theirs alone, and after untrusted content only with their approval.
    owner_only = True
    acts_outside = True

    async def run(self, args: SendToArgs, ctx: ToolContext) -> ToolResult:
        channel, _ = split_chat_key(ctx.chat)
        target = args.chat.strip() if ":" in args.chat else chat_key(channel, args.chat.strip())
        if target == ctx.chat:
            return ToolResult.error("that is this chat: use send_message or your final answer")
        return await _send(ctx, SendText(chat=target, text=args.text))


class ReplyToMessage(Tool[ReplyArgs]):
    name = "reply_to_message"
    description = "Send a message that quote-replies to a specific message in the current chat."
    args_model = ReplyArgs
    messaging = True

    async def run(self, args: ReplyArgs, ctx: ToolContext) -> ToolResult:
        return await _send(ctx, SendText(chat=ctx.chat, text=args.text, reply_to=args.message_id))


class EditMessage(Tool[EditArgs]):
    name = "edit_message"
    description = "Replace the text of a message you sent earlier in the current chat."
    args_model = EditArgs
    messaging = True

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        refused = _not_theirs(ctx, args.message_id)
        if refused is not None:
            return refused
        result = await ctx.perform(EditText(chat=ctx.chat, message_id=args.message_id, text=args.text))
        return _done(result, f"edited message {args.message_id}", "the edit")


class DeleteMessageTool(Tool[MessageRef]):
    name = "delete_message"
    description = "Delete a message you sent earlier in the current chat."
    args_model = MessageRef
    messaging = True

    async def run(self, args: MessageRef, ctx: ToolContext) -> ToolResult:
        refused = _not_theirs(ctx, args.message_id)
        if refused is not None:
            return refused
        result = await ctx.perform(DeleteMessage(chat=ctx.chat, message_id=args.message_id))
        return _done(result, f"deleted message {args.message_id}", "the deletion")


class AddReaction(Tool[ReactArgs]):
    name = "react"
    description = "Put an emoji reaction on a message: a light acknowledgement that needs no words."
    args_model = ReactArgs
    messaging = True

    async def run(self, args: ReactArgs, ctx: ToolContext) -> ToolResult:
        result = await ctx.perform(React(chat=ctx.chat, message_id=args.message_id, emoji=args.emoji))
        return ToolResult(f"reacted {args.emoji}") if result.ok else ToolResult.error(_why(result.error))


async def _send(ctx: ToolContext, action: SendText) -> ToolResult:
    result = await ctx.perform(action)
    if not result.ok:
        return ToolResult.error(_why(result.error))
    if result.queued:
        return ToolResult("queued: the chat did not take it yet, and it will be delivered; do not send it again")
    ctx.sent_message_ids.extend(result.message_ids)
    return ToolResult(f"sent message_id={','.join(result.message_ids)}")


def _done(result: ActionResult, done: str, what: str) -> ToolResult:
    if not result.ok:
        return ToolResult.error(_why(result.error))
    if result.queued:
        return ToolResult(f"queued: the chat did not take {what} yet, and it will be made; do not ask for it again")
    return ToolResult(done)


def _not_theirs(ctx: ToolContext, message_id: str) -> ToolResult | None:
    """Refuse to change a message unless it answered only these people's words (the owner may change any)."""
    if ctx.is_owner:
        return None
    audience = ctx.stores.messages.audience_of(ctx.chat, message_id) if ctx.stores is not None else None
    if audience is None:
        return ToolResult.error(f"message {message_id} is not one I sent in this chat")
    if not ctx.authority.among(audience):
        return ToolResult.error(
            f"message {message_id} answered someone else; only they or the owner can have it edited or deleted"
        )
    return None


def _why(error: str | None) -> str:
    return f"the chat refused it: {error or 'unknown error'}"
