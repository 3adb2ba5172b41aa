"""A running turn's CLI events, read in order and folded into its ledger and outcome: texts, tools, retries, results, exits."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from bicameral.claude_code.exchange import Prompt, TurnLedger, TurnOutcome, continuation, merged
from bicameral.claude_code.failures import WorkerGaveUp, classify, classify_rejected_turn, crash_failure
from bicameral.claude_code.process import Exited
from bicameral.claude_code.stream import (
    ApiRetry,
    AssistantText,
    ContextUsage,
    Init,
    Result,
    StreamEvent,
    ToolResult,
    ToolUse,
    UserReplay,
    preview,
)
from bicameral.claude_code.supervision import SessionIds, Supervisor
from bicameral.tools.base import ToolContext
from bicameral.types import Clock

log = logging.getLogger(__name__)
cc = logging.getLogger("bicameral.cc")

INTERRUPT_GRACE = 10.0  # seconds an interrupted turn gets to end before the process is killed
_POST_RESULT_GRACE = 3.0  # seconds to wait for an injected message the CLI has not taken yet
_MAX_RESTARTS_PER_TURN = 2
_HOPELESS_STATUSES = (401, 402, 403)  # API errors the CLI retries although a retry cannot help


class TurnEvents:
    """How a running turn reads the CLI's events and what it does with each; `ClaudeCodeWorker` is built on it.

    The worker supplies what these steps use: its name, the session, the supervisor, the running turn's tool
    context, and the process operations declared at the end.
    """

    name: str
    session_id: str | None
    _ctx: ToolContext | None
    _clock: Clock
    _sessions: SessionIds
    _supervisor: Supervisor
    _queue: asyncio.Queue[StreamEvent | Exited]  # what the process sent, in order; the worker fills it
    _getter: asyncio.Task[StreamEvent | Exited] | None

    # --- reading the events ---

    async def _next(self, timeout: float) -> StreamEvent | Exited | None:
        # One long-lived getter: cancelling a get on timeout could lose an event.
        if self._getter is None or self._getter.cancelled():
            self._getter = asyncio.create_task(self._queue.get())
        done, _ = await asyncio.wait({self._getter}, timeout=timeout)
        if not done:
            return None
        event = self._getter.result()
        self._getter = None
        return event

    def _flush_stale_events(self) -> None:
        if self._getter is not None and self._getter.done() and not self._getter.cancelled():
            log.debug("%s: dropped a stale event between turns: %s", self.name, self._getter.result())
            self._getter = None
        while not self._queue.empty():
            log.debug("%s: dropped a stale event between turns: %s", self.name, self._queue.get_nowait())

    # --- folding them into the turn ---

    async def _apply(
        self, event: StreamEvent | Exited, ledger: TurnLedger, outcome: TurnOutcome, may_restart: Callable[[], bool] | None
    ) -> bool:
        """Fold one event into the turn; True when the turn is over."""
        if isinstance(event, UserReplay):
            ledger.pending.discard(event.uuid)
        elif isinstance(event, AssistantText) and not event.subagent:
            (outcome.synthetic if event.synthetic else outcome.texts).append(event.text)
            cc.info("[CC.text] %s | %s", self.name, preview(event.text))
        elif isinstance(event, ToolUse) and not event.subagent:
            ledger.names[event.id] = event.name
            outcome.tool_uses.append(event)
            args = json.dumps(dict(event.input), ensure_ascii=False, default=str)
            cc.info("[CC.tool→] %s %s(%s) id=%s", self.name, event.name, preview(args), event.id)
        elif isinstance(event, ToolResult) and not event.subagent:
            await self._on_tool_result(event, ledger, outcome)
        elif isinstance(event, ContextUsage):
            outcome.context_tokens = event.tokens
        elif isinstance(event, Result):
            return await self._on_result(event, ledger, outcome)
        elif isinstance(event, Init):
            ledger.result_at = None
        elif isinstance(event, ApiRetry):
            await self._on_api_retry(event, ledger, outcome)
        elif isinstance(event, Exited) and event.pid == ledger.pid and event.pid not in ledger.handled_exits:
            ledger.handled_exits.add(event.pid)
            return await self._on_exit(event, ledger, outcome, may_restart)
        return False

    async def _on_tool_result(self, event: ToolResult, ledger: TurnLedger, outcome: TurnOutcome) -> None:
        mark = "✗" if event.is_error else "✓"
        cc.info("[CC.tool%s] %s id=%s | %s", mark, self.name, event.tool_use_id, preview(event.content))
        outcome.tool_errors += event.is_error
        tripped = ledger.breakers.after_call(ledger.names.get(event.tool_use_id, "a tool"), event.is_error)
        if tripped and outcome.stop_reason is None:
            outcome.stop_reason = tripped
            log.warning("%s: tool-error breaker tripped: %s", self.name, tripped)
            self._ctx = None  # calls the CLI still makes before the interrupt lands are refused
            await self.interrupt()
            ledger.interrupted_at = self._clock()

    async def _on_api_retry(self, event: ApiRetry, ledger: TurnLedger, outcome: TurnOutcome) -> None:
        cc.info("[CC.retry] %s attempt %d/%d: %s %s", self.name, event.attempt, event.max_retries, event.status, event.error)
        if event.status not in _HOPELESS_STATUSES or event.attempt < 2 or ledger.interrupted_at is not None:
            return
        # Rejected credentials or an exhausted plan do not heal within the CLI's minutes of retries: say so now.
        failure = classify(event.error, status=event.status)
        if failure is not None and outcome.failure is None:
            outcome.failure = failure
            log.warning("%s: %s on every try; stopping the turn", self.name, failure.kind)
            self._ctx = None
            await self.interrupt()
            ledger.interrupted_at = self._clock()

    async def _on_result(self, event: Result, ledger: TurnLedger, outcome: TurnOutcome) -> bool:
        outcome.result = event
        outcome.session_id = event.session_id or outcome.session_id
        flag = " (error)" if event.is_error else ""
        cc.info("[CC.done] %s %s%s %.1fs | %s", self.name, event.subtype, flag, event.duration_ms / 1000, preview(event.text))
        if ledger.interrupted_at is not None:
            return True  # the interrupt we asked for: not a failure of the session
        if event.is_error:
            evidence = event.text or " ".join(outcome.synthetic)
            failure = classify_rejected_turn(evidence, event.api_error_status, self._stderr_tail())
            log.warning("%s: turn rejected (%s): %s", self.name, failure.kind, preview(failure.detail))
            unconfirmed = failure.kind == "session_missing" and not self._sessions.confirmed()
            if unconfirmed and outcome.restarts < _MAX_RESTARTS_PER_TURN:
                # It died before its first turn reached the disk: nothing is lost by starting afresh.
                outcome.restarts += 1
                await self.reset_session()
                again = merged(ledger.unsettled())
                ledger.restart(await self._write(again), again, self._current_pid())
                return False
            outcome.failure = failure
            return True
        self._sessions.confirm(event.session_id)
        self.session_id = event.session_id or self.session_id
        self._supervisor.recovered()
        ledger.settle()
        diagnosis = classify(*outcome.synthetic) if outcome.synthetic else None
        if diagnosis is not None:
            outcome.failure = diagnosis  # the CLI wrote in the model's place (an API problem it reports as text)
            return True
        if not ledger.pending:
            return True
        ledger.result_at = self._clock()  # an injected message will run as the CLI's next turn: keep going
        return False

    async def _on_exit(
        self, event: Exited, ledger: TurnLedger, outcome: TurnOutcome, may_restart: Callable[[], bool] | None
    ) -> bool:
        if outcome.stop_reason is not None:
            return True  # killed after the breaker tripped: the turn is over anyway
        if self._supervisor.failure is not None:
            outcome.failure = self._supervisor.failure
            return True
        unsettled = ledger.unsettled()
        if not unsettled:
            return True  # it died after finishing everything it was given
        # Prompts the CLI had not answered when it died are always redone once something of this turn
        # was answered; before that, the caller decides (its first answer may be out already).
        after_result = outcome.result is not None
        allowed = after_result or (may_restart() if may_restart is not None else True)
        if outcome.restarts >= _MAX_RESTARTS_PER_TURN or not allowed:
            outcome.failure = self._supervisor.last_crash or crash_failure(event.code, self._stderr_tail())
            outcome.unfinished = after_result
            return True
        outcome.restarts += 1
        try:
            await self._ensure_running()
        except WorkerGaveUp as exc:
            outcome.failure = exc.failure
            return True
        self._supervisor.touch()
        again = continuation(unsettled, event.reason)
        ledger.restart(await self._write(again), again, self._current_pid())
        return False

    async def _waited_too_long(self, ledger: TurnLedger) -> bool:
        """Timeouts while no event comes: an ignored interrupt, an injected message the CLI never took."""
        now = self._clock()
        if ledger.interrupted_at is not None and now - ledger.interrupted_at > INTERRUPT_GRACE:
            self._kill("the turn did not stop after an interrupt", expected=True)
            ledger.interrupted_at = None
        if ledger.result_at is not None and now - ledger.result_at > _POST_RESULT_GRACE:
            log.warning("%s: %d injected message(s) were not taken by the CLI", self.name, len(ledger.pending))
            return True
        return False

    # --- what the worker supplies ---

    async def interrupt(self) -> None:
        raise NotImplementedError

    async def reset_session(self) -> None:
        raise NotImplementedError

    async def _ensure_running(self) -> None:
        raise NotImplementedError

    async def _write(self, prompt: Prompt) -> str:
        raise NotImplementedError

    def _current_pid(self) -> int | None:
        raise NotImplementedError

    def _stderr_tail(self) -> list[str]:
        raise NotImplementedError

    def _kill(self, reason: str, *, expected: bool) -> None:
        raise NotImplementedError
