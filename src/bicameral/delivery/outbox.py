"""The outbox: every message, edit and deletion is recorded before its first attempt, then carried out in order per chat
until done or given up. It is the one place that waits when a platform asks us to slow down."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from bicameral.backoff import backoff_delay
from bicameral.delivery.router import ActionRouter
from bicameral.events import COSMETIC_ACTIONS, Action, ActionResult, SendFile, SendText, Typing
from bicameral.store.outbox import GIVEN_UP, SENT, Claim, Fence, OutboxEntry, OutboxStore, Queued

log = logging.getLogger(__name__)

_QUEUED = ActionResult(ok=True, queued=True)
_HELD = ActionResult(ok=True, queued=True)  # not attempted: another worker holds the entry (told apart by identity)
_FENCED = "this chat is served by another worker now"
IN_FLIGHT_GRACE_SECONDS = 10.0  # how long a stop waits for the attempts under way
# A head another worker holds is looked at again when its claim lapses, and never sooner than this (no spinning)...
_HELD_RECHECK = 0.01
# ... nor later than this: that worker usually sends it at once, and this chat's next entry waits behind it.
_HELD_LOOK_AGAIN = 1.0


class Outbox:
    """Durable delivery of messages, edits and deletions; cosmetic actions and status texts go straight to the router.

    Channels never wait: one that fails for a temporary reason (Telegram's 429 with retry_after, 5xx,
    network) says so in its result, and the outbox waits (retry_after, or backoff if longer) and tries
    again, also after a restart. A text that stopped part-way is resumed after the parts that arrived.
    One refused for good, or still failing `give_up_after` seconds after it was recorded, is dropped
    with a log line. A chat's entries are carried out in the order they were recorded. The loop sleeps
    until the next due entry or a wake-up, so an idle outbox costs nothing.

    Typing indicators and reactions are cosmetic: sent once, never retried. So is a "status" text (the
    progress note), which is stale a moment later.

    Several processes may run an Outbox over one table, each with its own `worker` id: an entry is claimed in one
    statement before each attempt and stays its claimer's for `claim_seconds` past its due time, renewed while the
    claimer lives (`renew_claims`), so one worker at a time attempts it and a dead recorder's entries go out from
    another worker once their claim lapses. `fence`
    (checked inside the transaction that records a result or settles a turn) drops the late results of a worker that
    lost the chat. Without a worker id (one process) there are no claims and no extra statements.
    """

    def __init__(
        self,
        store: OutboxStore,
        router: ActionRouter,
        *,
        retry_base: float = 1.0,
        retry_cap: float = 300.0,
        give_up_after: float = 86400.0,
        clock: Callable[[], float] = time.time,
        release: Callable[[str], object] | None = None,
        worker: str | None = None,
        claim_seconds: float = 60.0,
        fence: Fence | None = None,
    ) -> None:
        self._store = store
        self._claim = Claim(worker, claim_seconds) if worker is not None else None
        self._fence = fence
        self._release = release  # deletes a sent file's snapshot
        self._router = router
        self._retry_base = retry_base
        self._retry_cap = retry_cap
        self._give_up_after = give_up_after
        self._clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._drains: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        # What this process recorded, unredacted: the store keeps only the redacted text.
        self._originals: dict[int, Queued] = {}
        self._settled = asyncio.Event()  # set whenever a message is sent or given up
        self._loop: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Future[ActionResult]] = set()  # attempts under way, finished even if their caller is not
        self.stopped = False

    async def start(self) -> None:
        """Begin delivering, starting with whatever a previous process left unsent."""
        self._loop = asyncio.create_task(self._run(), name="outbox")

    def wake(self) -> None:
        """Look at the table again now (another worker recorded entries this one may deliver)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop delivering, before the channels close: attempts under way end first (a request cut after the platform
        took the message would be sent again), none starts after; unsent messages stay recorded for the next start."""
        self.stopped = True
        tasks = [t for t in (self._loop, *self._drains.values()) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._in_flight:  # attempts under way end (or time out on their own) before the store closes
            await asyncio.wait(set(self._in_flight), timeout=IN_FLIGHT_GRACE_SECONDS)
        if self._claim is not None:  # what it leaves unsent goes out from the next worker at once
            with contextlib.suppress(Exception):
                self._store.let_go(self._claim.worker)

    async def perform(
        self, action: Action, *, turn: str | None = None, answers: Sequence[int] = (),
        on_recorded: Callable[[], None] | None = None,
    ) -> ActionResult:
        """Carry out a message, edit or deletion through the outbox; cosmetic actions, status texts and secrets go to
        their channel at once, once (a secret is never written to the outbox's table)."""
        if isinstance(action, COSMETIC_ACTIONS) or (isinstance(action, SendText) and action.purpose in ("status", "secret")):
            return await self._router.perform(action)
        [result] = await self.send([action], turn=turn, answers=answers, on_recorded=on_recorded)
        return result

    async def send(
        self,
        actions: Sequence[Queued],
        *,
        turn: str | None = None,
        pauses: Sequence[float] = (),
        on_recorded: Callable[[], None] | None = None,
        answers: Sequence[int] = (),
    ) -> list[ActionResult]:
        """Record the messages of one chat at once, then send what is due now; later parts follow their pauses.

        `pauses[i]` is the wait (shown as typing) between message i-1 and i. Recording every part before
        sending the first means a crash between parts neither repeats one nor loses the rest. `answers`: the inbound
        rows a turn's answer answers, held from the moment it is recorded (a restart delivers it, never answers again).
        """
        if not actions:
            return []
        chat = actions[0].chat
        now = self._clock()
        when, offset = [], 0.0
        for index in range(len(actions)):
            offset += pauses[index] if index and index < len(pauses) else 0.0
            when.append(now + offset)
        entries = self._store.add(actions, when, turn, answers, claim=self._claim, fence=self._fence)
        if not entries:
            log.info("late result dropped: %d message(s) to %s, %s", len(actions), chat, _FENCED)
            return [ActionResult.failed(_FENCED) for _ in actions]
        self._originals.update((entry.id, action) for entry, action in zip(entries, actions, strict=True))
        if on_recorded is not None:
            on_recorded()
        results = [_QUEUED] * len(entries)
        try:
            async with self._lock(chat):
                for index, entry in enumerate(entries):
                    head = self._store.head_place(chat)
                    if head is None or head.id > entry.id:  # a drain that held the chat before us already took it
                        state = self._store.state_of(entry.id)
                        results[index] = ActionResult(ok=True) if state == SENT else ActionResult.failed("not delivered")
                        continue
                    # Only a message that is first in line, due now and never tried goes out on the caller's
                    # time; one a drain tried meanwhile waits out its backoff in the loop.
                    if head.id != entry.id or head.attempts or head.not_before > self._clock():
                        break
                    results[index] = await self._attempt(entry)
                if not results[0].queued and results[-1].queued and _is_message(actions[0]):
                    # The next part is waiting out its pause: show the user more is coming.
                    await self._router.perform(Typing(chat=chat, thread_id=_thread_of(actions[0])))
        finally:
            if any(result.queued for result in results):
                self._wake.set()  # what is left (or was cut short by a cancel) is the loop's to send
        return results

    async def flush(self) -> None:
        """Wait until every recorded message is sent or given up (before a clean exit)."""
        while self._store.pending():
            self._settled.clear()
            self._wake.set()
            await self._settled.wait()

    def settle(self, turn: str, row_ids: Sequence[int | None], *, chat: str | None = None) -> None:
        """A turn ended: its inbound messages count as answered once its last message is out (unless fenced off)."""
        if self._store.settle(turn, row_ids, chat=chat, fence=self._fence):
            log.info("turn %s is answered once its last message is delivered", turn)

    def renew_claims(self) -> None:
        """With several workers, called now and then (more often than the claim's length): this worker lives, so the
        entries it claimed stay its own; and the table is looked at again, since nothing else wakes an idle loop for
        the entries a dead worker left, which are this one's to send once their claims lapse."""
        if self._claim is not None:
            self._store.renew_claims(self._claim, self._clock())
            self.wake()

    def held_rows(self, chat: str | None = None) -> set[int]:
        """Inbound rows (of one chat, or all) whose answer waits in the outbox: they must not be answered again."""
        return self._store.held_rows(chat)

    # --- delivery ---

    def _lock(self, chat: str) -> asyncio.Lock:
        return self._locks.setdefault(chat, asyncio.Lock())

    async def _attempt(self, entry: OutboxEntry) -> ActionResult:
        """One attempt, carried to its end even when its caller is cancelled (a turn stopped, the app stopping): a
        request cut after the platform took the message would leave it unrecorded, and the next attempt sends it
        again. `stop` waits for the attempts under way."""
        if self.stopped:  # the channels close next: it is left for the next start (or another worker) to send
            return _QUEUED
        attempt = asyncio.ensure_future(self._attempt_once(entry))
        self._in_flight.add(attempt)
        attempt.add_done_callback(self._in_flight.discard)
        return await asyncio.shield(attempt)

    async def _attempt_once(self, entry: OutboxEntry) -> ActionResult:
        if self._claim is not None and not self._store.claim(entry.id, self._claim, self._clock()):
            return _HELD  # another worker attempts it now; the loop comes back when that claim lapses
        action = self._originals.get(entry.id, entry.action)
        if entry.parts_sent and isinstance(action, SendText):
            action = replace(action, sent_parts=entry.parts_sent)  # only the parts that did not arrive
        result = await self._router.deliver(action)
        if result.ok:
            self._originals.pop(entry.id, None)
            # The chat's history and the outbox agree: the message is in both or in neither.
            with self._store.transaction():
                self._router.record(action, result)
                self._store.finish(entry.id, SENT)
            self._done_with(entry)
            self._settled.set()
            return result
        self._router.record(action, result)
        error = result.error or "unknown error"
        waited = self._clock() - entry.created_at
        if result.retry_after is None or waited >= self._give_up_after:
            why = "refused" if result.retry_after is None else f"still failing after {waited:.0f}s"
            log.warning(
                "gave up on message %d to %s (%s, %d attempt(s)): %s", entry.id, entry.chat, why, entry.attempts + 1, error
            )
            self._originals.pop(entry.id, None)
            self._store.finish(entry.id, GIVEN_UP, error)
            self._done_with(entry)
            self._settled.set()
            return result
        delay = max(backoff_delay(self._retry_base, self._retry_cap, entry.attempts + 1), result.retry_after)
        log.info("message %d to %s not accepted (%s); retrying in %.1fs", entry.id, entry.chat, error, delay)
        # The parts that arrived stay arrived: a failure that sent nothing new keeps what an earlier one sent.
        arrived = max(entry.parts_sent, result.message_ids, key=len) if isinstance(action, SendText) else ()
        self._store.retry_later(entry.id, self._clock() + delay, error, arrived, self._claim)
        return _QUEUED

    def _done_with(self, entry: OutboxEntry) -> None:
        """A file's snapshot goes once its message is sent or given up, unless another message still sends it."""
        action = entry.action
        if self._release is None or not isinstance(action, SendFile):
            return
        if action.path in self._store.file_paths(pending=True):
            return
        try:
            self._release(action.path)
        except OSError:  # a leftover copy is pruned on a later start; delivery must not fail over it
            log.warning("could not delete the sent copy %s", action.path, exc_info=True)

    async def _run(self) -> None:
        # Ended by `stop`'s cancel, and by its flag too. (Python 3.11's wait_for dropped a cancel that came as the
        # wake-up did, and the loop then waited for ever with `stop` waiting on it; asyncio.timeout does not.)
        while not self.stopped:
            self._wake.clear()
            try:
                wait = self._dispatch()
            except Exception:  # e.g. the database is briefly unavailable: try again shortly
                log.exception("outbox dispatch failed")
                wait = self._retry_base
            if wait is None or wait > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()

    def _dispatch(self) -> float | None:
        """Start draining every chat whose first message is due; seconds until the next one falls due."""
        now = self._clock()
        wait: float | None = None
        for head in self._store.heads():
            chat = head.chat
            if self._lock(chat).locked() or (chat in self._drains and not self._drains[chat].done()):
                continue  # whoever holds the chat wakes the loop when done
            if not self._mine(head, now):  # another live worker holds it: due when its claim lapses
                until = min(max((head.claimed_until or now) - now, _HELD_RECHECK), _HELD_LOOK_AGAIN)
            elif head.not_before <= now:
                self._drains[chat] = asyncio.create_task(self._drain(chat), name=f"outbox:{chat}")
                continue
            else:
                until = head.not_before - now
            wait = until if wait is None else min(wait, until)
        return wait

    def _due(self, head: OutboxEntry, now: float) -> bool:
        return head.not_before <= now and self._mine(head, now)

    def _mine(self, head: OutboxEntry, now: float) -> bool:
        """May this worker attempt the entry now (always, for a single process)?"""
        return self._claim is None or self._claim.holds(head, now)

    async def _drain(self, chat: str) -> None:
        try:
            async with self._lock(chat):
                while (head := self._store.head(chat)) is not None and self._due(head, self._clock()):
                    result = await self._attempt(head)
                    if result is _HELD:
                        break  # taken by another worker since it was read: the loop waits for that claim
                    following = self._store.head(chat)
                    if result.ok and following is not None and following.attempts == 0 and _is_message(following.action):
                        # The next part is waiting out its pause: show the user more is coming.
                        await self._router.perform(Typing(chat=chat, thread_id=_thread_of(following.action)))
        except Exception:
            log.exception("outbox delivery to %s failed", chat)
            await asyncio.sleep(self._retry_base)  # the chat stays claimed meanwhile, so the loop cannot spin
        finally:
            self._wake.set()


def _is_message(action: Queued) -> bool:
    return isinstance(action, SendText | SendFile)


def _thread_of(action: Queued) -> str | None:
    return action.thread_id if isinstance(action, SendText | SendFile) else None
