"""Harness overhead per message: sequential DMs against a zero-latency model, in-process and as `bicameral run`."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import (
    OWNER,
    TimedTelegram,
    bench_settings,
    fakes,
    open_access,
    percentile,
    running_app,
    tag,
    tag_of,
    tagged_responder,
    wait_until,
)
from bench.load import FIRST_CHAT, warm_up
from bench.proc import spawn_bot, stop_bot, wait_ready
from bench.report import Figure
from bicameral.models.base import Message, ModelEvent, ToolSpec
from bicameral.models.caps import SpendingCaps
from bicameral.models.metered import Meter
from bicameral.models.scope import enter
from tests.fakes.model_server import ModelServer, Request

REPLY_TIMEOUT = 30.0
# The child's chats take turns: by a chat's next message its last turn has long wound down (which
# in-process is waited for directly), and no chat nears the shipped 20 messages a minute.
SUBPROCESS_CHATS = 20


@dataclass
class OverheadResult:
    """Per-message latencies in milliseconds, matched by tag."""

    messages: int
    where: str = ""  # "" in-process (the fakes share the app's interpreter), "subprocess " for `bicameral run`
    answered: int = 0
    model_requests: int = 0
    inbound_to_model: list[float] = field(default_factory=list)
    reply_to_send: list[float] = field(default_factory=list)
    round_trip: list[float] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        name = "overhead"
        rows = []
        for label, values, what in (
            ("inbound → model request", self.inbound_to_model,
             "getUpdates hands the update out → model server receives the (first) request"),
            ("model reply → sendMessage", self.reply_to_send,
             "model server completes the (last) request → fake receives sendMessage"),
            ("inbound → sendMessage", self.round_trip, "the whole turn, with a 0 s model"),
        ):
            rows.append(Figure(name, f"{self.where}{label} p50", percentile(values, 50), "ms", what))
            rows.append(Figure(name, f"{self.where}{label} p99", percentile(values, 99), "ms", f"max {max(values):.2f} ms"))
        rows.append(Figure(name, f"{self.where}messages answered", self.answered, f"/ {self.messages}",
                           "sent one at a time, each after the previous turn ended"))
        rows.append(Figure(name, f"{self.where}model requests per message", self.model_requests / max(self.messages, 1), "x"))
        return rows


async def run_overhead(messages: int = 200, mode: str | None = None) -> OverheadResult:
    """After a warm-up, send `messages` DMs one at a time (each after the last turn ended); time the harness."""
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        models.responder(tagged_responder(0.0))
        settings = bench_settings(Path(tmp), telegram, models, mode)
        sent: dict[int, tuple[int, int]] = {}
        async with running_app(settings) as app:
            await warm_up(telegram)  # the first turn after start pays one-time set-up; startup reports it
            for i in range(messages):
                before = telegram.replies
                message = telegram.user_sends(OWNER, f"hello {tag(i)}")
                sent[i] = (OWNER, int(message["message_id"]))
                await wait_until(lambda before=before: telegram.replies > before, REPLY_TIMEOUT)
                # Only then the next: a message arriving while the turn winds down would join it instead.
                await wait_until(lambda: not app.conversation.busy_chats(), REPLY_TIMEOUT)
        return _match(messages, sent, telegram, models)


async def run_overhead_subprocess(messages: int = 200, mode: str | None = None) -> OverheadResult:
    """The same with `python -m bicameral run` as a child: the fakes' work no longer shares its interpreter."""
    with fakes() as (telegram, models), tempfile.TemporaryDirectory(prefix="bench-overhead-proc-") as tmp:
        models.responder(tagged_responder(0.0))
        data_dir = Path(tmp) / "data"
        open_access(data_dir)
        proc = spawn_bot(telegram, models, data_dir, mode)
        sent: dict[int, tuple[int, int]] = {}
        try:
            await wait_ready(telegram, proc, time.monotonic())
            await warm_up(telegram)
            for i in range(messages):
                before = telegram.replies
                user = FIRST_CHAT + i % SUBPROCESS_CHATS
                message = telegram.user_sends(user, f"hello {tag(i)}")
                sent[i] = (user, int(message["message_id"]))
                await wait_until(lambda before=before: telegram.replies > before, REPLY_TIMEOUT)
        finally:
            stop_bot(proc)
        return _match(messages, sent, telegram, models, where="subprocess ")


def _match(
    messages: int, sent: dict[int, tuple[int, int]], telegram: TimedTelegram, models: ModelServer, where: str = ""
) -> OverheadResult:
    """Pair each message with its model requests and reply by tag, and record the gaps."""
    requests: dict[int, list[Request]] = defaultdict(list)
    for request in models.requests:
        found = tag_of(request.last_user_text())
        if found is not None:
            requests[found].append(request)
    result = OverheadResult(messages, where, model_requests=sum(len(r) for r in requests.values()))
    replies: dict[int, float] = {}
    for text, ts in telegram.send_calls():
        found = tag_of(text)
        if found is not None:
            replies.setdefault(found, ts)
    for i, key in sent.items():
        seen, replied = telegram.handed_out.get(key), replies.get(i)
        if seen is None or replied is None or not requests.get(i):
            continue
        result.answered += 1
        result.inbound_to_model.append((min(r.received_at for r in requests[i]) - seen) * 1000)
        result.round_trip.append((replied - seen) * 1000)
        # The reply leaves after the last model call of its turn (a voice pass may follow the answer). In
        # process, the fake model server's thread may note its completion only after the reply went out:
        # that turn has no gap to time.
        done = [r.completed_at for r in requests[i] if r.completed_at is not None and r.completed_at <= replied]
        if done:
            result.reply_to_send.append((replied - max(done)) * 1000)
    return result


class _Silent:
    """A model that answers at once with nothing: what is left of a call is the metering around it."""

    name = "bench:silent"

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        return
        yield

    async def aclose(self) -> None:
        return None


async def cap_check_figures(calls: int = 20_000, rounds: int = 5) -> list[Figure]:
    """What the spending caps add to each model call: a metered call to a model that answers at once, with both caps
    set (counters warm, the caller a person under them) and without, best of `rounds`; and the check alone."""
    caps = SpendingCaps(
        per_user=10**12, everyone=10**12, owner_id=OWNER, load_spend=lambda since: (0, {}), load_allowances=lambda day: {},
    )
    plain = Meter().wrap(_Silent(), "single")
    checked = Meter(check=caps.refusal_text, count=caps.note).wrap(_Silent(), "single")
    people = ("telegram:2002",)

    async def timed(model: object) -> float:
        stream = model.stream  # type: ignore[attr-defined]
        started = time.perf_counter()
        for _ in range(calls):
            async for _event in stream("", [], [], 1):
                pass
        return (time.perf_counter() - started) / calls * 1e6

    async def measure() -> tuple[float, float]:
        enter("telegram:2002", people)  # in this task only, as a turn sets it
        await timed(plain)  # warm-up
        best = [float("inf"), float("inf")]
        for _ in range(rounds):  # alternated, so a busy moment of the machine weighs on both
            best = [min(best[0], await timed(plain)), min(best[1], await timed(checked))]
        return best[0], best[1]

    without, with_caps = await asyncio.create_task(measure())
    started = time.perf_counter()
    for _ in range(calls):
        caps.check(people)
    alone = (time.perf_counter() - started) / calls * 1e6
    what = f"best of {rounds} x {calls:,} calls to a model that answers at once"
    return [
        Figure("overhead", "cap check per model call", with_caps - without, "µs",
               f"{with_caps:.2f} µs a metered call with both caps set, {without:.2f} µs without; {what}"),
        Figure("overhead", "cap check alone", alone, "µs", "SpendingCaps.check for one person, counters warm"),
    ]
