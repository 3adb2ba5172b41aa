"""The gate: access, rate limit, normalize, scrub, persist; only then does anything think."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from bicameral.channels.base import Cursor
from bicameral.delivery.router import ActionRouter
from bicameral.events import Inbound, OwnerId, SendText, chat_key, is_owner, owner_on
from bicameral.gate.access import AccessPolicy
from bicameral.gate.digest import refused_digest
from bicameral.gate.pairing import Pairing
from bicameral.gate.ratelimit import RateLimiter, Verdict
from bicameral.observe import transcript
from bicameral.redaction import scrub
from bicameral.sandbox.paths import PathRefused
from bicameral.sandbox.workspace import add_to_workspace, workspace_for
from bicameral.store import Stores
from bicameral.store.messages import IGNORED, PENDING
from bicameral.text import normalize
from bicameral.types import Clock, Perform

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# A full disk or a database error: the message was not stored and must be offered again.
STORAGE_ERRORS = (sqlite3.Error, OSError)

PRIVATE_NOTICE = "This is a private assistant. Please contact its owner if you'd like access."
RATE_NOTICE = "You're sending messages faster than I can read them. I'll pick up again in a minute."
GROUP_RATE_NOTICE = "This group is sending me more than I can read. I'll pick up again in a minute."
MAX_NAME_CHARS = 128  # display names and chat titles; Telegram's own limits are lower
REFUSED_TEXT_CHARS = 500  # of a refused message, enough to recognise it, not to store a payload
# Notices in flight at once; beyond this a flood of strangers gets no notice rather than a queue.
MAX_PENDING_NOTICES = 32
QUOTED_NOTICE = "[one of my notices, not conversation: its text is not shown]"


@dataclasses.dataclass(frozen=True)
class GateConfig:
    """What the gate is given: the owner, where files go, how long a message may be, the group rate limits (the
    per-sender one is the `RateLimiter`'s) and how refused messages are kept and reported."""

    owner_id: OwnerId
    data_dir: Path
    max_inbound_chars: int
    group_member_rate_limit_per_min: int
    group_rate_limit_per_min: int
    refused_keep: int
    refused_digest_interval_seconds: float
    # The owner's commands: from anyone else they are dropped unread (no reply, no record, no log of their text).
    owner_commands: frozenset[str] = frozenset()


class Gate:
    """The channels' sink: returns only after every accepted inbound is stored."""

    def __init__(
        self,
        config: GateConfig,
        access: AccessPolicy,
        stores: Stores,
        router: ActionRouter,
        forward: Callable[[Inbound], Awaitable[None]],
        ratelimiter: RateLimiter | None = None,
        clock: Clock = time.time,
        *,
        send: Perform | None = None,
        # Whether a message answers a question we asked its sender (`tools/ask.py`): in a group it needs no mention.
        awaited: Callable[[Inbound], bool] | None = None,
        pairing: Pairing | None = None,
    ) -> None:
        self._config = config
        self._access = access
        self._stores = stores
        self._router = router
        self._forward = forward
        # How notices go out: the app's outbox, which records them and waits out a platform's "slow down" like
        # any message's; without one, straight through the router, once.
        self._send = send or router.perform
        self._ratelimiter = ratelimiter
        self._clock = clock
        self._awaited = awaited
        # A stranger's one-time code from the owner's /pair lets them in instead of being refused.
        self._pairing = pairing
        self._notices: set[asyncio.Task[object]] = set()

    @property
    def access(self) -> AccessPolicy:
        """The access policy in force (the owner's commands and tests change it through this)."""
        return self._access

    async def __call__(self, batch: Sequence[Inbound], cursor: Cursor | None = None) -> None:
        # One write transaction per batch, not two per message. Files are downloaded outside it (a
        # transaction is never held across an await): a batch with files is screened (refusals, rate
        # counts) in one transaction and stored in a second, after the downloads. A channel's cursor
        # is stored in the transaction that stores the messages, so a restart neither replays nor loses them.
        with self._stores.db.tx():
            screened = [found for inbound in batch if (found := self._guarded(self._screen, inbound))]
            downloads = any(inbound.attachment_refs for inbound, _ in screened)
            kept = [] if downloads else self._keep_all(screened, cursor)
        if downloads:
            fetched = []
            for inbound, status in screened:
                ready = await self._fetched(inbound) if inbound.attachment_refs else inbound
                if ready is not None:
                    fetched.append((ready, status))
            with self._stores.db.tx():
                kept = self._keep_all(fetched, cursor)
        for inbound in kept:
            await self._forward(inbound)

    def cursor(self, channel: str) -> str | None:
        """The position stored with the channel's last batch (see `__call__`)."""
        return self._stores.cursors.get(channel)

    def _keep_all(self, screened: Sequence[tuple[Inbound, str]], cursor: Cursor | None = None) -> list[Inbound]:
        kept = [ready for inbound, status in screened if (ready := self._guarded(self._keep, inbound, status))]
        if cursor is not None:
            self._stores.cursors.set(cursor.channel, cursor.position)
        return kept

    def _guarded(self, step: Callable[..., _T | None], inbound: Inbound, *args: object) -> _T | None:
        """One message's step in its own savepoint: a poisoned message is skipped, the batch goes on."""
        with self._isolated(inbound), self._stores.db.tx():
            return step(inbound, *args)
        return None

    @contextlib.contextmanager
    def _isolated(self, inbound: Inbound) -> Iterator[None]:
        """A storage error stops the batch; any other error skips only this message."""
        try:
            yield
        except STORAGE_ERRORS:
            # The batch's transaction rolls back whole, so nothing of it is kept or acknowledged: the
            # channel offers it again.
            log.error("could not store %s m%s; the batch will be offered again", inbound.chat, inbound.message_id)
            raise
        except Exception:
            # One poisoned message must not block the batch (or the offset) for everyone else.
            log.exception("gate failed on %s m%s; skipped", inbound.chat, inbound.message_id)

    def _screen(self, inbound: Inbound) -> tuple[Inbound, str] | None:
        """Clean, check access and count against the rate limit: the cleaned message and the status to store
        it with, or None if it is refused."""
        inbound = self._clean(inbound)
        if inbound.command in self._config.owner_commands and not is_owner(inbound, self._config.owner_id):
            log.debug("dropped an owner command from someone else in %s", inbound.chat)
            return None
        if not self._access.allows(inbound):
            paired = self._pairing.redeem(inbound) if self._pairing is not None else None
            if paired is not None:  # a code tried: neither kept nor refused (its text is the code, or a guess at it)
                transcript.drop(inbound.chat, inbound.sender.name, "pairing code")
                for told in paired:
                    self._notify(told)
                return None
            self._refuse(inbound)
            return None
        inbound = self._unquoted_notice(inbound)
        addressed = inbound.addressed or (self._awaited is not None and self._awaited(inbound))
        status = PENDING if addressed else IGNORED
        if status == PENDING and not is_owner(inbound, self._config.owner_id) and self._ratelimiter:
            verdict, notice = self._rate_check(inbound)
            if verdict is not Verdict.ALLOW:
                status = IGNORED
                transcript.drop(inbound.chat, inbound.sender.name, "rate limited")
                if verdict is Verdict.WARN:
                    reply_to = None if inbound.is_private else inbound.message_id
                    self._notify(SendText(inbound.chat, notice, reply_to=reply_to, thread_id=inbound.thread_id))
        return inbound, status

    async def _fetched(self, inbound: Inbound) -> Inbound | None:
        """Download an admitted message's files (refused senders' files never are) and copy them to the workspace."""
        with self._isolated(inbound):
            channel = self._router.channel_for(inbound.chat)
            fetched = await channel.fetch_attachments(inbound) if channel else dataclasses.replace(inbound, attachment_refs=())
            return self._copy_to_workspace(fetched)
        return None

    def _keep(self, inbound: Inbound, status: str) -> Inbound | None:
        """Store the message; returned (with its row id) when a turn should answer it."""
        row_id = self._stores.messages.record_inbound(inbound, status)
        if row_id is None:
            log.info("duplicate update %s in %s ignored", inbound.update_id, inbound.chat)
            return None
        transcript.rx(inbound.chat, inbound.sender.name, inbound.message_id, inbound.text, edit=inbound.kind == "edit")
        return dataclasses.replace(inbound, row_id=row_id) if status == PENDING else None

    def _copy_to_workspace(self, inbound: Inbound) -> Inbound:
        """Put received files in the chat's workspace too, where the file tools and `run` can use them."""
        data_dir = self._config.data_dir
        copied = []
        for attachment in inbound.attachments:
            try:
                copy = add_to_workspace(data_dir, inbound.chat, data_dir / attachment.path, attachment.name)
                root = workspace_for(data_dir, inbound.chat).resolve()
                attachment = dataclasses.replace(attachment, workspace_path=copy.relative_to(root).as_posix())
            except (OSError, PathRefused, ValueError) as exc:  # the message and its attachment are kept either way
                log.warning("could not copy %s into the workspace of %s: %s", attachment.path, inbound.chat, exc)
            copied.append(attachment)
        return dataclasses.replace(inbound, attachments=tuple(copied))

    def _refuse(self, inbound: Inbound) -> None:
        """Keep a bounded record of the refused message, tell a DM once, and send the owner a digest when due."""
        config, now = self._config, self._clock()
        unauthorized = self._stores.unauthorized
        first = unauthorized.record(
            inbound.chat,
            inbound.sender.id,
            inbound.sender.name,
            inbound.text,
            title=None if inbound.is_private else inbound.chat_title or inbound.chat,
            keep=config.refused_keep,
            max_chars=REFUSED_TEXT_CHARS,
            now=now,
        )
        transcript.drop(inbound.chat, inbound.sender.name, "not allowed by access policy")
        if first and inbound.is_private:
            self._notify(SendText(chat=inbound.chat, text=PRIVATE_NOTICE))
        owner = owner_on(config.owner_id, inbound.channel)  # the owner on the channel the stranger wrote on
        if owner is None:
            return
        refused = unauthorized.take_digest(now, config.refused_digest_interval_seconds)
        if refused:
            self._notify(SendText(chat=chat_key(inbound.channel, owner), text=refused_digest(refused)))

    def _rate_check(self, inbound: Inbound) -> tuple[Verdict, str]:
        """A DM counts against its sender; a group message against its sender there, then the group."""
        assert self._ratelimiter is not None
        config = self._config
        if inbound.is_private:
            return self._ratelimiter.check(inbound.sender.id), RATE_NOTICE
        member = self._ratelimiter.check(f"{inbound.chat}|{inbound.sender.id}", config.group_member_rate_limit_per_min)
        if member is not Verdict.ALLOW:
            # A member over their own limit does not also use up the group's budget.
            return member, RATE_NOTICE
        return self._ratelimiter.check(inbound.chat, config.group_rate_limit_per_min), GROUP_RATE_NOTICE

    def _notify(self, notice: SendText) -> None:
        """Send a notice in the background: a slow or rate-limited send must never hold up intake."""
        if len(self._notices) >= MAX_PENDING_NOTICES:
            log.warning("notice to %s dropped: %d notices already in flight", notice.chat, len(self._notices))
            return
        notice = dataclasses.replace(notice, purpose="notice")
        task = asyncio.create_task(self._send_notice(notice), name=f"notice:{notice.chat}")
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def _send_notice(self, notice: SendText) -> None:
        """Send a notice and keep it as one: a notice is not conversation (a digest carries names and titles
        strangers chose), so it is recorded apart from what any model reads back (`messages.NOTICE`)."""
        result = await self._send(notice)
        if not result.ok:
            log.info("notice to %s not sent: %s", notice.chat, result.error)

    def _unquoted_notice(self, inbound: Inbound) -> Inbound:
        """The owner replying to a digest: Telegram sends the quoted digest along, which would carry the
        strangers' names into the prompt after all. The quote keeps only that it was a notice."""
        quoted = inbound.reply_to
        if quoted is None or not quoted.from_bot or not is_owner(inbound, self._config.owner_id):
            return inbound
        if not self._stores.messages.is_notice(inbound.chat, quoted.message_id):
            return inbound
        return dataclasses.replace(inbound, reply_to=dataclasses.replace(quoted, text=QUOTED_NOTICE))

    async def close(self) -> None:
        """Cancel notices still in flight (at shutdown)."""
        tasks = list(self._notices)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _clean(self, inbound: Inbound) -> Inbound:
        """Normalise and scrub everything the user controls: text, quoted text, names, the chat title."""
        text, flags = _cleaned(inbound.text, "", self._config.max_inbound_chars)
        name, name_flags = _cleaned(inbound.sender.name, "name:", MAX_NAME_CHARS)
        flags += name_flags
        title = inbound.chat_title
        if title is not None:
            title, title_flags = _cleaned(title, "chat_title:", MAX_NAME_CHARS)
            flags += title_flags
        quoted = inbound.reply_to
        if quoted is not None:
            quote_text, quote_flags = _cleaned(quoted.text, "quote:", self._config.max_inbound_chars)
            quote_name, quote_name_flags = _cleaned(quoted.sender_name, "quote_name:", MAX_NAME_CHARS)
            quoted = dataclasses.replace(quoted, text=quote_text, sender_name=quote_name)
            flags += quote_flags + quote_name_flags
        return dataclasses.replace(
            inbound,
            text=text,
            sender=dataclasses.replace(inbound.sender, name=name),
            chat_title=title,
            reply_to=quoted,
            flags=tuple(inbound.flags) + flags,
        )


def _cleaned(text: str, flag_prefix: str, limit: int) -> tuple[str, tuple[str, ...]]:
    """One user-controlled string normalised, cut to `limit` and scrubbed, with what had to change."""
    normalized = normalize(text)
    text = normalized.text
    if len(text) > limit:
        text = text[:limit] + f"\n[message truncated: {len(normalized.text) - limit} more characters not shown]"
    return scrub(text), tuple(flag_prefix + flag for flag in normalized.flags)
