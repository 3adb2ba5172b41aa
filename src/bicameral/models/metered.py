"""Every model call counted: when it ends, its tokens, outcome, role and chat go to a recorder; the last outcome of
each model is kept in memory for the owner's health report."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from bicameral.models.base import Message, Model, ModelError, ModelEvent, ToolSpec, Usage
from bicameral.models.scope import current_chat, current_spender
from bicameral.types import Clock

log = logging.getLogger(__name__)

OK = "ok"
CANCELLED = "cancelled"  # the turn or task was stopped, or the caller stopped reading
FAILED = "error"  # an exception that is not a ModelError (a bug, a build that failed)


@dataclass(frozen=True)
class ModelCall:
    """One finished model call, as the usage record keeps it."""

    model: str  # the model's name, provider:model
    role: str  # front | back | single
    chat: str | None  # the chat it was made for (models.scope.current_chat), None outside any
    usage: Usage
    outcome: str  # ok | cancelled | error | a ModelError kind (rate_limit, auth, ...)
    at: float  # when it ended
    cost_usd: float | None = None  # the provider's own figure, where it reports one (the Claude Code CLI)
    people: tuple[str, ...] = ()  # whose words caused it (models.scope.current_spender), person keys


Record = Callable[[ModelCall], None]
# Whether a call for these people may start: None, or why not (a spending cap reached).
Check = Callable[[tuple[str, ...]], str | None]
CAP = "cap"  # the ModelError kind of a call a spending cap refused before it started


class MeteredModel:
    """Wraps a Model: the same events, their `Usage` summed, and one `record(ModelCall)` when the call ends, however
    it ends (answered, `ModelError`, cancelled, abandoned). With a `check`, a call it refuses raises
    `ModelError("cap")` before the inner model is asked, and is not recorded (no call was made)."""

    def __init__(
        self, model: Model, role: str, record: Record, clock: Clock = time.time, check: Check | None = None
    ) -> None:
        self.inner = model
        self.name = model.name
        self.role = role
        self._record = record
        self._clock = clock
        self._check = check

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        chat = current_chat.get()
        spender = current_spender.get()
        people = spender.people if spender is not None else ()
        if self._check is not None and (refused := self._check(people)) is not None:
            if spender is not None:
                spender.refused = refused  # the run that made it holds its messages (turns/lanes.py)
            raise ModelError(CAP, refused)
        usage = Usage()
        outcome = CANCELLED  # what is left when the caller stops reading (GeneratorExit) or the task is cancelled
        events = self.inner.stream(system, messages, tools, max_tokens)
        try:
            async for event in events:
                if type(event) is Usage:
                    usage = usage + event
                yield event
            outcome = OK
        except ModelError as exc:
            outcome = exc.kind
            raise
        except Exception:
            outcome = FAILED
            raise
        finally:
            close = getattr(events, "aclose", None)
            if close is not None and outcome == CANCELLED:
                await close()  # a reader that stopped early: the inner call's connection is let go now
            try:
                self._record(ModelCall(self.name, self.role, chat, usage, outcome, self._clock(), people=people))
            except Exception:  # counting must never fail the call it counts
                log.exception("could not record a call of %s", self.name)


@dataclass
class Outcome:
    """How a model's calls went lately: when it last answered, and its last error."""

    last_ok: float | None = None
    last_error: str | None = None  # the ModelError kind
    last_error_at: float | None = None
    calls: int = 0
    errors: int = 0


class ModelOutcomes:
    """The last outcome of each model since the start, in memory (the health report reads it)."""

    def __init__(self) -> None:
        self._by_model: dict[str, Outcome] = {}

    def note(self, call: ModelCall) -> None:
        if call.outcome == CANCELLED:
            return  # says nothing about the model
        outcome = self._by_model.get(call.model)
        if outcome is None:
            outcome = self._by_model[call.model] = Outcome()
        outcome.calls += 1
        if call.outcome == OK:
            outcome.last_ok = call.at
        else:
            outcome.errors += 1
            outcome.last_error, outcome.last_error_at = call.outcome, call.at

    def get(self, model: str) -> Outcome | None:
        return self._by_model.get(model)

    def snapshot(self) -> dict[str, Outcome]:
        """Each model's outcome so far (copies), by name."""
        return {name: Outcome(**vars(outcome)) for name, outcome in self._by_model.items()}

    def lines(
        self, now: float | None = None, expected: Sequence[str] = (), when: Callable[[float, float], str] | None = None
    ) -> list[str]:
        """One line per model called since the start, e.g.
        `openai:gpt-4.1: 12 calls, last answered 3 min ago; last error 2 h ago (rate_limit)`, and one for each
        model named in `expected` that was not called yet (`openai:gpt-4.1: no call since the start`). `when(then,
        now)` words a time (default: `ago`)."""
        now = time.time() if now is None else now
        when = when or ago
        # A configured ref may name less than the model it builds (`local` → `local:SmolLM2-….gguf`).
        called = [name for ref in expected for name in self._by_model if name == ref or name.startswith(ref + ":")]
        lines = [f"{ref}: no call since the start" for ref in dict.fromkeys(expected) if not any(
            name == ref or name.startswith(ref + ":") for name in called)]
        for name, outcome in sorted(self._by_model.items()):
            calls = f"{outcome.calls} call{'s' if outcome.calls != 1 else ''}"
            answered = f"last answered {when(outcome.last_ok, now)}" if outcome.last_ok is not None else "never answered"
            line = f"{name}: {calls}, {answered}"
            if outcome.last_error is not None and outcome.last_error_at is not None:
                line += f"; last error {when(outcome.last_error_at, now)} ({outcome.last_error})"
            else:
                line += "; no errors"
            lines.append(line)
        return lines


def ago(then: float, now: float) -> str:
    """`just now`, `42 s ago`, `3 min ago`, `2 h ago`, `4 d ago`."""
    seconds = max(0.0, now - then)
    if seconds < 1:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


class Meter:
    """Where finished calls go: the last outcome per model, then `persist` (the usage table); a failing `persist` is
    logged, never raised into the call."""

    def __init__(
        self, persist: Record | None = None, clock: Clock = time.time, *, check: Check | None = None,
        count: Record | None = None,
    ) -> None:
        self.outcomes = ModelOutcomes()
        self._persist = persist
        self._clock = clock
        self._check = check  # before each call: the spending caps
        self._count = count  # after each call, once stored: the caps' counters

    def __call__(self, call: ModelCall) -> None:
        self.outcomes.note(call)
        if self._persist is not None:
            try:
                self._persist(call)
            except Exception:  # a full disk, a closed database: the call itself went fine
                log.exception("could not store the usage of a call of %s", call.model)
        if self._count is not None:
            try:
                self._count(call)
            except Exception:
                log.exception("could not count a call of %s against the caps", call.model)

    def wrap(self, model: Model, role: str) -> MeteredModel:
        """`model` counted under `role` (front, back or single)."""
        return MeteredModel(model, role, self, self._clock, self._check)
