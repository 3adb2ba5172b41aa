"""The Matrix channel: a sync loop whose token is stored with the messages it brought, on matrix-nio."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nio import (
    AsyncClient,
    AsyncClientConfig,
    ProfileGetDisplayNameResponse,
    RoomGetEventResponse,
    SyncError,
    SyncResponse,
)
from pydantic import SecretStr

from bicameral.backoff import Backoff
from bicameral.channels.base import Cursor, InboundSink, OnEnd
from bicameral.channels.downloads import AttachmentSaver
from bicameral.errors import ConfigError
from bicameral.events import Action, ActionResult, Capabilities, CommandMenu, Inbound, split_chat_key
from bicameral.redaction import Redactor
from bicameral.types import Sleep

from .actions import MAX_TEXT, ActionPerformer
from .media import matrix_download
from .rooms import Rooms, after_own_join
from .session import REVOKED, log_in
from .translate import CHANNEL, Me, Replied, is_mentioned, replied_to, translate

log = logging.getLogger(__name__)

SYNC_TIMEOUT_MS = 30000  # the long poll: the homeserver holds a sync this long when nothing happens
JOIN_RETRY_MS = 2000  # how long the next sync waits while a join is to be tried again
LOOKUPS_KEPT = 512  # looked-up events remembered (a thread's root is asked for once, not per message)
SYNC_GRACE_SECONDS = 15.0  # past the long poll, how long a sync may take before it counts as failed
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0


@dataclass(frozen=True)
class MatrixConfig:
    """What the Matrix channel is given: the homeserver and the bot's account (a token, or a password whose login
    is kept in `session_file`), where received files go, and who may invite it (access.json and the owner)."""

    homeserver: str
    user_id: str
    access_token: SecretStr | None
    password: SecretStr | None
    data_dir: Path
    attachments_dir: Path
    session_file: Path
    may_invite: Callable[[str], bool]
    sync_timeout_ms: int = SYNC_TIMEOUT_MS


class MatrixChannel:
    """Receives Matrix room messages as Inbound values and performs Actions in the rooms."""

    name = CHANNEL
    capabilities = Capabilities(max_text=MAX_TEXT, threads=True, buttons=False)

    def __init__(self, config: MatrixConfig, *, sleep: Sleep = asyncio.sleep) -> None:
        if not config.homeserver.startswith(("http://", "https://")):
            raise ConfigError("BICAMERAL_MATRIX_HOMESERVER must be the homeserver's URL (https://matrix.example.org)")
        if not config.user_id.startswith("@") or ":" not in config.user_id:
            raise ConfigError("BICAMERAL_MATRIX_USER_ID must be a full Matrix user id (@bot:example.org)")
        token = config.access_token.get_secret_value() if config.access_token else ""
        password = config.password.get_secret_value() if config.password else ""
        if not token and not password:
            raise ConfigError("set BICAMERAL_MATRIX_ACCESS_TOKEN or BICAMERAL_MATRIX_PASSWORD for the Matrix account")
        self._config = config
        self._token, self._password = token or None, password or None
        self._redact = Redactor([s for s in (token, password) if s])
        self._sleep = sleep
        # nio's own retries are off (it would sleep out a 429 or a timeout inside a call): the loop backs off itself.
        client_config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, encryption_enabled=False,
                                          store_sync_tokens=False, request_timeout=60)
        self._client = AsyncClient(config.homeserver.rstrip("/"), config.user_id, config=client_config)
        self._actions = ActionPerformer(self._client, data_dir=config.data_dir, redact=self._redact)
        self._media = AttachmentSaver(matrix_download(self._client), data_dir=config.data_dir,
                                      attachments_dir=config.attachments_dir, redact=self._redact)
        self._me = Me(config.user_id, "")
        self._since: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._rooms = Rooms(self._client, self._actions, may_invite=config.may_invite, redact=self._redact)
        self._events: dict[str, tuple[Replied, bool]] = {}  # events looked up (replied to, thread roots), the latest
        self.failure: str | None = None

    @property
    def me(self) -> Me:
        return self._me

    async def start(self, sink: InboundSink, on_end: OnEnd) -> None:
        """Log in (or check the kept login), learn our display name, then sync in the background."""
        await self._connect()
        self._since = sink.cursor(CHANNEL)
        self._on_end = on_end
        log.info("matrix: connected as %s (%s)", self._me.user_id,
                 "resuming" if self._since else "first start: history skipped")
        self._task = asyncio.create_task(self._sync_loop(sink), name="matrix-sync")

    async def start_sending(self) -> None:
        """Log in as `start` does (a password login reuses the kept device), but never sync: another worker receives.
        Without a sync there is no room list, so which rooms are DMs is asked of the homeserver (in the background)."""
        await self._connect()
        self._actions.syncing = False
        log.info("matrix: connected as %s to send only", self._me.user_id)
        self._task = asyncio.create_task(self._learn_directs(), name="matrix-directs")

    async def _connect(self) -> None:
        await log_in(self._client, token=self._token, password=self._password, session_file=self._config.session_file)
        user_id = self._client.user_id
        name = await self._client.get_displayname(user_id)
        display = name.displayname if isinstance(name, ProfileGetDisplayNameResponse) and name.displayname else ""
        self._me = Me(user_id, display or user_id.split(":", 1)[0].lstrip("@"))

    async def _learn_directs(self) -> None:
        try:
            await self._actions.learn_directs()
        except Exception as exc:  # each room is looked at again at this worker's first send there
            log.warning("matrix: could not list the DM rooms: %s", self._redact(f"{type(exc).__name__}: {exc}"))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._client.close()

    async def perform(self, action: Action) -> ActionResult:
        return await self._actions.perform(action)

    async def fetch_attachments(self, inbound: Inbound) -> Inbound:
        return await self._media.fetch_all(inbound)

    async def show_commands(self, menu: CommandMenu) -> None:
        """Matrix has no command menu: /help lists them."""

    def is_direct_with(self, chat: str, user: str) -> bool:
        """Whether `chat` is our DM with `user` (the room a message to `matrix:<user>` goes to), as the rooms stand."""
        channel, room = split_chat_key(chat)
        return channel == CHANNEL and self._actions.is_direct_with(room, user)

    # --- receiving ---

    async def _sync_loop(self, sink: InboundSink) -> None:
        backoff = Backoff(BACKOFF_START, BACKOFF_MAX)
        first = True
        while True:
            try:
                # The first sync of a process asks for every room's full state (members, names, encryption). nio
                # sets no time limit on that one: a server that never answers must not hold the loop forever.
                wait = JOIN_RETRY_MS if self._rooms.pending_joins else self._config.sync_timeout_ms
                sync = self._client.sync(timeout=0 if first else min(wait, self._config.sync_timeout_ms),
                                         since=self._since, full_state=first, set_presence="offline")
                async with asyncio.timeout(self._config.sync_timeout_ms / 1000 + SYNC_GRACE_SECONDS):  # not wait_for:
                    response = await sync  # on 3.11 it may drop the cancel of `stop` that comes as a sync ends
            except Exception as exc:  # a timeout, a refused connection, a body that is not JSON (a 500 page)
                delay = backoff.next()
                log.warning("matrix sync failed (%s); retrying in %.0fs", self._redact(f"{type(exc).__name__}: {exc}"), delay)
                await self._sleep(delay)
                continue
            if isinstance(response, SyncError):
                if response.status_code == "M_UNKNOWN_TOKEN":
                    self.failure = REVOKED
                    log.error("%s; matrix sync stopped", REVOKED)
                    self._on_end(REVOKED)
                    return
                delay = response.retry_after_ms / 1000 if response.retry_after_ms else backoff.next()
                log.warning("matrix sync refused (%s %s); retrying in %.0fs", response.status_code, response.message, delay)
                await self._sleep(min(delay, BACKOFF_MAX))
                continue
            skip_history = self._since is None  # a fresh account: what was said before we came is not answered
            try:
                await self._deliver(response, sink, skip_history)
            except Exception as exc:  # a join or a lookup that failed: the same sync is asked for again (its
                # token was not stored), so nothing is lost
                delay = backoff.next()
                log.warning("matrix: handling a sync failed (%s); retrying in %.0fs",
                            self._redact(f"{type(exc).__name__}: {exc}"), delay)
                await self._sleep(delay)
                continue
            backoff.reset()
            first = False

    async def _deliver(self, response: SyncResponse, sink: InboundSink, skip_history: bool) -> None:
        """Hand the sync's messages to the sink with its token (both stored in one transaction), then move on."""
        await self._rooms.answer_invites(response, self._me.user_id)
        batch: list[Inbound] = []
        for room_id, joined in response.rooms.join.items():
            if room_id in self._rooms.left:
                continue
            events = [event.source for event in (*joined.state, *joined.timeline.events)]
            self._rooms.note_creators(room_id, events)
            if await self._rooms.refused(room_id, events):
                continue
            if not skip_history:
                batch += await self._translate_room(room_id, [e.source for e in joined.timeline.events])
        cursor = Cursor(CHANNEL, response.next_batch)
        backoff = Backoff(BACKOFF_START, BACKOFF_MAX)
        while True:
            try:
                await sink(batch, cursor)
                break
            except Exception:
                delay = backoff.next()
                log.exception("matrix: inbound sink failed; retrying the same %d events in %.0fs", len(batch), delay)
                await self._sleep(delay)
        self._since = response.next_batch
        await self._mark_read(batch)

    async def _translate_room(self, room_id: str, events: Sequence[dict[str, Any]]) -> list[Inbound]:
        room = self._rooms.view(room_id)
        found: list[Inbound] = []
        for raw in after_own_join(events, self._me.user_id):
            if raw.get("sender") == self._me.user_id:
                self._note_own(raw)  # sent by this worker or another one sharing the database
                continue
            try:
                replied = await self._replied(room_id, raw)
                inbound = translate(raw, room, self._me, replied, self._actions.threads)
            except Exception as exc:  # one odd event must not stop the rest
                log.warning("matrix: skipping an event in %s: %s", room_id, self._redact(f"{type(exc).__name__}: {exc}"))
                continue
            if inbound is not None:
                found.append(inbound)
        return found

    def _note_own(self, raw: dict[str, Any]) -> None:
        """Our own event, as the sync shows it: whichever worker sent it, a reply to it addresses us, and so does a
        later message in the thread it went to (as `ActionPerformer` notes for what this worker sends itself)."""
        event_id, content = raw.get("event_id"), raw.get("content")
        if raw.get("type") != "m.room.message" or not isinstance(event_id, str) or not isinstance(content, dict):
            return
        self._actions.sent.add(event_id)
        relation = content.get("m.relates_to")
        if isinstance(relation, dict) and relation.get("rel_type") == "m.thread" and isinstance(relation.get("event_id"), str):
            self._actions.threads.add(relation["event_id"])

    async def _replied(self, room_id: str, raw: dict[str, Any]) -> Replied | None:
        """What a message refers to, looked up: the event it replies to, else the root of the thread it is in (the
        thread's question, shown with it). A thread whose root is ours or mentioned us is ours: we answered there."""
        content = raw.get("content")
        target = replied_to(content)
        relation = content.get("m.relates_to") if isinstance(content, dict) else None
        root = relation.get("event_id") if isinstance(relation, dict) and relation.get("rel_type") == "m.thread" else None
        thread: Replied | None = None
        if isinstance(root, str) and root != raw.get("event_id"):
            found = await self._lookup(room_id, root)
            if found is not None:
                thread, mentioned_us = found
                if thread.sender == self._me.user_id or mentioned_us:
                    self._actions.threads.add(root)
        if target is None:
            return thread
        looked = await self._lookup(room_id, target)
        return None if looked is None else looked[0]

    async def _lookup(self, room_id: str, event_id: str) -> tuple[Replied, bool] | None:
        """An event of the room (remembered): who sent it, its words, and whether it mentioned us."""
        if event_id in self._events:
            return self._events[event_id]
        if event_id in self._actions.sent:
            return Replied(event_id, self._me.user_id, ""), False
        answer = await self._client.room_get_event(room_id, event_id)
        if not isinstance(answer, RoomGetEventResponse):
            return None
        source = answer.event.source
        content = source.get("content") if isinstance(source.get("content"), dict) else {}
        body = content.get("body")
        found = Replied(event_id, str(source.get("sender", "")), body if isinstance(body, str) else ""), is_mentioned(
            content, self._me)
        if len(self._events) >= LOOKUPS_KEPT:
            self._events.pop(next(iter(self._events)))
        self._events[event_id] = found
        return found

    async def _mark_read(self, batch: Sequence[Inbound]) -> None:
        """Read receipts for what was stored (cosmetic: a failure is only logged)."""
        last: dict[str, str] = {}
        for inbound in batch:
            if inbound.kind == "message":
                last[inbound.chat.split(":", 1)[1]] = inbound.message_id
        for room_id, event_id in last.items():
            try:
                await self._client.room_read_markers(room_id, event_id, event_id)
            except Exception as exc:
                log.info("matrix: no read receipt in %s: %s", room_id, type(exc).__name__)
