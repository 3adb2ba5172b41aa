"""The gate: access, rate limit, normalize, scrub, persist; only then does anything think."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence

from bicameral.config import Settings
from bicameral.conversation.router import ActionRouter
from bicameral.events import Inbound, SendText, is_owner
from bicameral.gate.access import AccessPolicy
from bicameral.gate.normalize import normalize
from bicameral.gate.ratelimit import RateLimiter, Verdict
from bicameral.observe import transcript
from bicameral.redaction import scrub
from bicameral.store import Stores
from bicameral.store.messages import IGNORED, PENDING

log = logging.getLogger(__name__)

PRIVATE_NOTICE = "This is a private assistant. Please contact its owner if you'd like access."
RATE_NOTICE = "You're sending messages faster than I can read them. I'll pick up again in a minute."


class Gate:
    """The channels' sink: returns only after every accepted inbound is stored."""

    def __init__(
        self,
        settings: Settings,
        access: AccessPolicy,
        stores: Stores,
        router: ActionRouter,
        forward: Callable[[Inbound], Awaitable[None]],
        ratelimiter: RateLimiter | None = None,
    ) -> None:
        self._settings = settings
        self._access = access
        self._stores = stores
        self._router = router
        self._forward = forward
        self._ratelimiter = ratelimiter

    async def __call__(self, batch: Sequence[Inbound]) -> None:
        accepted: list[Inbound] = []
        for inbound in batch:
            try:
                ready = await self._admit(inbound)
            except Exception:
                # One poisoned message must not block the batch (or the offset) for everyone else.
                log.exception("gate failed on %s m%s; skipped", inbound.chat, inbound.message_id)
                continue
            if ready is not None:
                accepted.append(ready)
        for inbound in accepted:
            await self._forward(inbound)

    async def _admit(self, inbound: Inbound) -> Inbound | None:
        inbound = self._clean(inbound)
        if not self._access.allows(inbound):
            first = self._stores.unauthorized.record(inbound.chat, inbound.sender.id, inbound.sender.name, inbound.text)
            transcript.drop(inbound.chat, inbound.sender.name, "not allowed by access policy")
            if first and inbound.is_private:
                await self._router.perform(SendText(chat=inbound.chat, text=PRIVATE_NOTICE))
            return None
        status = PENDING if inbound.addressed else IGNORED
        if status == PENDING and inbound.is_private and not is_owner(inbound, self._settings.owner_id) and self._ratelimiter:
            verdict = self._ratelimiter.check(inbound.sender.id)
            if verdict is not Verdict.ALLOW:
                status = IGNORED
                transcript.drop(inbound.chat, inbound.sender.name, "rate limited")
                if verdict is Verdict.WARN:
                    await self._router.perform(SendText(chat=inbound.chat, text=RATE_NOTICE))
        if inbound.attachment_refs:
            # Only now, with the sender admitted, is anything downloaded (refused senders' files never are).
            channel = self._router.channel_for(inbound.chat)
            inbound = await channel.fetch_attachments(inbound) if channel else dataclasses.replace(inbound, attachment_refs=())
        row_id = self._stores.messages.record_inbound(inbound, status)
        if row_id is None:
            log.info("duplicate update %s in %s ignored", inbound.update_id, inbound.chat)
            return None
        transcript.rx(inbound.chat, inbound.sender.name, inbound.message_id, inbound.text, edit=inbound.kind == "edit")
        return dataclasses.replace(inbound, row_id=row_id) if status == PENDING else None

    def _clean(self, inbound: Inbound) -> Inbound:
        normalized = normalize(inbound.text)
        text = normalized.text
        limit = self._settings.max_inbound_chars
        if len(text) > limit:
            text = text[:limit] + f"\n[message truncated: {len(normalized.text) - limit} more characters not shown]"
        return dataclasses.replace(inbound, text=scrub(text), flags=tuple(inbound.flags) + normalized.flags)
