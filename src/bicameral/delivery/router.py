"""Routes each Action to its chat's channel, then records what was sent; one attempt (the outbox retries)."""

from __future__ import annotations

import logging

from bicameral.channels.base import AnswersPresses, Channel
from bicameral.events import (
    COSMETIC_ACTIONS,
    SECRET_PLACEHOLDER,
    Action,
    ActionResult,
    DeleteMessage,
    Draft,
    EditText,
    Inbound,
    React,
    SendFile,
    SendText,
    split_chat_key,
)
from bicameral.failures import failure_detail
from bicameral.observe import transcript
from bicameral.store.messages import MessageStore

log = logging.getLogger(__name__)
_NO_DRAFTS = ActionResult.failed("this channel shows no drafts")


class ActionRouter:
    def __init__(self, messages: MessageStore | None = None) -> None:
        self._channels: dict[str, Channel] = {}
        self._messages = messages

    def register(self, channel: Channel) -> None:
        self._channels[channel.name] = channel

    def channel_for(self, chat: str) -> Channel | None:
        return self._channels.get(split_chat_key(chat)[0])

    def answered_later(self, inbound: Inbound) -> None:
        """A press handed on to be answered later (maybe by another worker): its channel leaves it to us."""
        channel = self.channel_for(inbound.chat)
        if inbound.press is not None and isinstance(channel, AnswersPresses):
            channel.answered_later(inbound.press.id)

    async def perform(self, action: Action) -> ActionResult:
        """Perform an action and record it; a failure is reported in the result and logged, never raised."""
        result = await self.deliver(action)
        self.record(action, result)
        return result

    async def deliver(self, action: Action) -> ActionResult:
        """Perform an action without recording it (the caller records it with `record`)."""
        channel = self.channel_for(action.chat)
        if channel is None:
            return ActionResult.failed(f"no channel serves {action.chat}")
        if isinstance(action, Draft) and not channel.capabilities.drafts:
            return _NO_DRAFTS  # the chamber stops drafting for the turn; the reply arrives whole
        try:
            return await channel.perform(action)
        except Exception as exc:  # a channel bug must not take the turn down
            log.error("channel %s failed on %s: %s", channel.name, type(action).__name__, failure_detail(exc))
            return ActionResult.failed("the channel failed unexpectedly (the details are in the log)")

    def record(self, action: Action, result: ActionResult) -> None:
        """Log what was done, and keep a sent message in the chat's history (a notice apart from it)."""
        if isinstance(action, Draft):
            return  # not a message: the reply it becomes is logged and kept when it is sent
        if isinstance(action, COSMETIC_ACTIONS):
            if not result.ok:
                log.info("cosmetic %s skipped in %s: %s", type(action).__name__, action.chat, result.error)
            elif isinstance(action, React):
                transcript.action("REACT", action.chat, f"{action.emoji} on m{action.message_id}")
            return
        if not result.ok:
            transcript.tx_failed(action.chat, f"{type(action).__name__}: {result.error}")
            return
        if isinstance(action, SendText) and action.purpose == "secret":
            transcript.tx(action.chat, result.message_ids, SECRET_PLACEHOLDER)
            self._store(action.chat, result, SECRET_PLACEHOLDER, action.audience, notice=True)
        elif isinstance(action, SendText):
            transcript.tx(action.chat, result.message_ids, action.text)
            self._store(action.chat, result, action.text, action.audience, notice=action.purpose == "notice")
        elif isinstance(action, SendFile):
            transcript.tx(action.chat, result.message_ids, f"[{action.kind}: {action.path}] {action.caption or ''}")
            self._store(action.chat, result, action.caption or f"[{action.kind}: {action.path}]", action.audience)
        elif isinstance(action, EditText):
            transcript.action("EDIT", action.chat, f"m{action.message_id} | {action.text}")
        elif isinstance(action, DeleteMessage):
            transcript.action("DEL", action.chat, f"m{action.message_id}")

    def _store(
        self, chat: str, result: ActionResult, text: str, audience: tuple[str, ...], *, notice: bool = False
    ) -> None:
        if self._messages is None:
            return
        channel = split_chat_key(chat)[0]
        for message_id in result.message_ids or (None,):
            if notice:
                # Kept for the record, out of every history a model reads (`messages.NOTICE`).
                self._messages.record_notice(chat, channel, message_id, text)
            else:
                self._messages.record_outbound(chat, channel, message_id, text, audience)
