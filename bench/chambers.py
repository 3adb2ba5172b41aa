"""Two chambers against one model: model calls, tokens and reaction times on the same scripted exchanges."""

from __future__ import annotations

import asyncio
import math
import statistics
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import OWNER, TimedTelegram, bench_settings, fakes, percentile, running_app, wait_until
from bench.report import Figure
from bicameral.app import App
from tests.fakes.model_server import ModelServer, Reply, Request, ToolCall

MODES = ("bicameral", "single")
KINDS = ("trivial", "task")
FRONT, BACK = "front", "back"  # model names on the fake server; single mode's one model is BACK
FRONT_LATENCY = 0.4  # a small, fast model
LARGE_LATENCY = 2.0  # a large model, per request
EXCHANGE_TIMEOUT = 30.0
TEXTS = {"trivial": "hey", "task": "what time is it in Tokyo?"}
WARM_UP = "hi"
CHAT = f"telegram:{OWNER}"
VISIBLE = {"sendmessage", "setmessagereaction"}  # typing indicators are not a reaction


@dataclass(frozen=True)
class ModelCall:
    """One model request of an exchange, with the usage the fake model server reported."""

    model: str
    input_tokens: int
    output_tokens: int


@dataclass
class Exchange:
    """One user message and everything it caused; times in seconds from the update's hand-out."""

    answered: bool
    first_reaction: float | None = None  # first sendMessage or setMessageReaction
    final_answer: float | None = None  # last sendMessage
    calls: list[ModelCall] = field(default_factory=list)

    def requests(self, model: str | None = None) -> int:
        """Model requests, of one model or of all."""
        return sum(1 for c in self.calls if model is None or c.model == model)

    def tokens(self, model: str | None = None) -> tuple[int, int]:
        """(input, output) tokens, of one model or of all."""
        mine = [c for c in self.calls if model is None or c.model == model]
        return sum(c.input_tokens for c in mine), sum(c.output_tokens for c in mine)


@dataclass
class ChambersResult:
    """Exchanges per (mode, kind), in the order they ran."""

    counts: dict[str, int]
    exchanges: dict[tuple[str, str], list[Exchange]]

    def answered(self, mode: str, kind: str) -> int:
        """Exchanges that got every message they should have."""
        return sum(e.answered for e in self.exchanges[(mode, kind)])

    def mean(self, mode: str, kind: str, value: Callable[[Exchange], float]) -> float:
        """Mean of `value` over the exchanges of one mode and kind."""
        return statistics.fmean(value(e) for e in self.exchanges[(mode, kind)])

    def p50(self, mode: str, kind: str, attr: str) -> float:
        """Median of a timing attribute over the exchanges that have it."""
        values = [getattr(e, attr) for e in self.exchanges[(mode, kind)] if getattr(e, attr) is not None]
        return percentile(values, 50) if values else math.nan

    def requests(self, mode: str, kind: str, model: str | None = None) -> float:
        """Mean model requests per exchange."""
        return self.mean(mode, kind, lambda e: e.requests(model))

    def tokens(self, mode: str, kind: str, model: str | None = None) -> tuple[float, float]:
        """Mean (input, output) tokens per exchange."""
        return self.mean(mode, kind, lambda e: e.tokens(model)[0]), self.mean(mode, kind, lambda e: e.tokens(model)[1])

    def figures(self) -> list[Figure]:
        """Usage per chamber, latencies, then the bicameral/single ratios."""
        return self._usage_rows() + self._latency_rows() + self._ratio_rows()

    def _usage_rows(self) -> list[Figure]:
        name, rows = "chambers", []
        chambers = (
            ("bicameral", FRONT, "bicameral front"),
            ("bicameral", BACK, "bicameral back"),
            ("single", BACK, "single"),
        )
        # How tokens are counted is said once, on the first tokens row, to keep the table narrow.
        estimate = " (the fake's estimate: 1 token per 4 characters of the JSON sent or scripted)"
        for kind in KINDS:
            n = self.counts[kind]
            done = ", ".join(f"{m} {self.answered(m, kind)}/{n}" for m in MODES)
            how = f"“{TEXTS[kind]}” ×{n}, one at a time in one DM, after an unmeasured “{WARM_UP}”"
            answered = sum(self.answered(m, kind) for m in MODES)
            rows.append(Figure(name, f"{kind}: exchanges answered", answered, f"/ {n * len(MODES)}", f"{done}; {how}"))
            for mode, model, label in chambers:
                requests = self.requests(mode, kind, model)
                tokens_in, tokens_out = self.tokens(mode, kind, model)
                size = "small model" if model == FRONT else "large model"
                rows.append(Figure(name, f"{kind}: {label} requests", requests, "x",
                                   f"per exchange, {size}: {_REQUEST_NOTES[(kind, mode, model)]}"))
                rows.append(Figure(name, f"{kind}: {label} tokens", tokens_in + tokens_out, "tokens",
                                   f"per exchange: in {tokens_in:,.0f} + out {tokens_out:,.0f}{estimate}"))
                estimate = ""
        return rows

    def _latency_rows(self) -> list[Figure]:
        name, rows = "chambers", []
        scripted = f"; scripted: front {FRONT_LATENCY:g} s, large model {LARGE_LATENCY:g} s per request"
        for kind in KINDS:
            for mode in MODES:
                p50 = self.p50(mode, kind, "first_reaction")
                rows.append(Figure(name, f"{kind}: {mode} first reaction p50", p50, "s",
                                   f"update handed out → first sendMessage or setMessageReaction{scripted}"))
                scripted = ""
        for mode in MODES:
            rows.append(Figure(name, f"task: {mode} final answer p50", self.p50(mode, "task", "final_answer"), "s",
                               "update handed out → the answer's sendMessage"))
        return rows

    def _ratio_rows(self) -> list[Figure]:
        name = "chambers"

        def tokens(mode: str, kind: str, model: str | None = None) -> float:
            return sum(self.tokens(mode, kind, model))

        rows = [
            ("trivial requests", self.requests("bicameral", "trivial"), self.requests("single", "trivial"),
             "per “hey”, all models"),
            ("trivial tokens", tokens("bicameral", "trivial"), tokens("single", "trivial"),
             "per “hey”, input + output, all models"),
            ("trivial large-model tokens", tokens("bicameral", "trivial", BACK), tokens("single", "trivial", BACK),
             "per “hey”, back vs the one model (the front is the small, cheap one)"),
            ("task requests", self.requests("bicameral", "task"), self.requests("single", "task"),
             "per task: front triage + voice pass, back tool call + answer"),
            ("task tokens", tokens("bicameral", "task"), tokens("single", "task"),
             "per task, input + output, all models"),
            ("task large-model tokens", tokens("bicameral", "task", BACK), tokens("single", "task", BACK),
             "the back gets a task brief; single, the whole session"),
            ("trivial first reaction p50", self.p50("bicameral", "trivial", "first_reaction"),
             self.p50("single", "trivial", "first_reaction"), "how soon a “hey” is answered"),
            ("task first reaction p50", self.p50("bicameral", "task", "first_reaction"),
             self.p50("single", "task", "first_reaction"), "the front's acknowledgement vs single's answer"),
            ("task final answer p50", self.p50("bicameral", "task", "final_answer"),
             self.p50("single", "task", "final_answer"), "the answer itself, after the voice pass in bicameral"),
        ]
        return [Figure(name, f"bicameral/single: {label}", _ratio(a, b), "x", note) for label, a, b, note in rows]


_REQUEST_NOTES = {
    ("trivial", "bicameral", FRONT): "the front answers alone",
    ("trivial", "bicameral", BACK): "a greeting never reaches the back",
    ("trivial", "single", BACK): "the one model answers",
    ("task", "bicameral", FRONT): "spawn + acknowledgement, then the voice pass",
    ("task", "bicameral", BACK): "tool call, then the answer",
    ("task", "single", BACK): "tool call, then the answer",
}


def _ratio(a: float, b: float) -> float:
    """a / b, or NaN when there is nothing to divide by."""
    return a / b if b else math.nan


# --- the scripted models ---


def _is_voice_pass(req: Request) -> bool:
    """The front rephrasing or framing a task's result."""
    return "Rephrase the text" in req.system or "Rewrite its result" in req.system


def _newest_text(req: Request) -> str:
    """The last text part of the last user message: the new message, not the front's situation block before it."""
    user = next((m for m in reversed(req.messages) if m.get("role") == "user"), None)
    content = (user or {}).get("content")
    if isinstance(content, list):
        texts = [str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"]
        return texts[-1] if texts else ""
    return str(content or "")


def _asks_for_task(req: Request) -> bool:
    """The user's new message (or the back's brief) is the task request."""
    return "tokyo" in _newest_text(req).lower()


def front(req: Request) -> Reply:
    """The small model: greets back, or spawns a task and acknowledges it, or voices a result."""
    if _is_voice_pass(req):
        return Reply(text="Here you go: " + req.last_user_text().strip(), latency=FRONT_LATENCY)
    if _asks_for_task(req):
        spawn = ToolCall("spawn", {"spec": "Find the current time in Tokyo (Asia/Tokyo).", "label": "tokyo time"})
        return Reply(tool_calls=[spawn, ToolCall("reply", {"text": "on it, checking Tokyo's clock"})],
                     latency=FRONT_LATENCY)
    return Reply(text="hey! what's up?", latency=FRONT_LATENCY)


def large(req: Request) -> Reply:
    """The back, or single mode's one model: greets back, or looks the time up with a tool and answers."""
    results = req.tool_results()
    if results:
        return Reply(text=f"In Tokyo it is {results[0]['content']}.", latency=LARGE_LATENCY)
    if _asks_for_task(req):
        return Reply(tool_calls=[ToolCall("current_time", {"timezone": "Asia/Tokyo"})], latency=LARGE_LATENCY)
    return Reply(text="hey! what's up?", latency=LARGE_LATENCY)


# --- driving one stream: a mode, a kind of exchange, one chat ---


@dataclass
class _Rig:
    """One stream's app and fakes."""

    mode: str
    kind: str
    telegram: TimedTelegram
    models: ModelServer
    app: App


def _settled(rig: _Rig, first_request: int) -> bool:
    """No turn running, no task open or waiting to be delivered, no model request in flight."""
    tasks = rig.app.tasks
    return (
        not rig.app.conversation.busy_chats()
        and not tasks.open_tasks()
        and not tasks.undelivered(CHAT)
        and all(r.completed_at is not None for r in rig.models.requests[first_request:])
    )


async def _exchange(rig: _Rig, text: str, expected_sends: int) -> Exchange:
    """Send one message, wait until everything it caused is done, and collect what happened."""
    first_request = len(rig.models.requests)
    before = rig.telegram.replies
    message = rig.telegram.user_sends(OWNER, text)
    try:
        await wait_until(lambda: rig.telegram.replies >= before + expected_sends, EXCHANGE_TIMEOUT, interval=0.01)
        answered = True
    except TimeoutError:
        answered = False
    # Only then the next message: one arriving while a turn or task winds down would join it instead.
    await wait_until(lambda: _settled(rig, first_request), EXCHANGE_TIMEOUT, interval=0.01)
    calls = [_model_call(r) for r in rig.models.requests[first_request:]]
    seen = rig.telegram.handed_out.get((OWNER, int(message["message_id"])))
    if seen is None:
        return Exchange(answered=False, calls=calls)
    visible = [c for c in rig.telegram.calls if c.method.lower() in VISIBLE and c.status == 200 and c.ts >= seen]
    sends = [c.ts for c in visible if c.method.lower() == "sendmessage"]
    return Exchange(
        answered=answered,
        first_reaction=min(c.ts for c in visible) - seen if visible else None,
        final_answer=max(sends) - seen if sends else None,
        calls=calls,
    )


def _model_call(req: Request) -> ModelCall:
    """The request's model and the usage the server reported (its length-based estimate, never scripted here)."""
    usage = (req.response or {}).get("usage") or {}
    return ModelCall(req.model, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))


async def _drive(rig: _Rig, count: int) -> list[Exchange]:
    """One unmeasured warm-up, then `count` exchanges of the rig's kind, one after another."""
    await _exchange(rig, WARM_UP, 1)  # the first turn pays lazy set-up (clients, connections)
    expected = 2 if rig.mode == "bicameral" and rig.kind == "task" else 1  # acknowledgement, then the answer
    return [await _exchange(rig, TEXTS[rig.kind], expected) for _ in range(count)]


async def run_chambers(trivial: int = 20, tasks: int = 10) -> ChambersResult:
    """Run the scripted exchanges in both modes; each (mode, kind) gets its own app, fakes and chat."""
    counts = {"trivial": trivial, "task": tasks}
    async with AsyncExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-chambers-")))
        rigs: list[_Rig] = []
        for mode in MODES:
            for kind in KINDS:
                telegram, models = stack.enter_context(fakes())
                models.responder(front, model=FRONT)
                models.responder(large, model=BACK)
                settings = bench_settings(root / f"{mode}-{kind}", telegram, models, mode,
                                          front_model=f"openai:{FRONT}", back_model=f"openai:{BACK}")
                app = await stack.enter_async_context(running_app(settings))
                rigs.append(_Rig(mode, kind, telegram, models, app))
        # The four streams run at once (the scripted latencies dominate); each keeps its own chat sequential.
        runs = await asyncio.gather(*(_drive(rig, counts[rig.kind]) for rig in rigs))
    return ChambersResult(counts, {(rig.mode, rig.kind): run for rig, run in zip(rigs, runs, strict=True)})
