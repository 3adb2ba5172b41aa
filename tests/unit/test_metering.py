"""Every model call counted: MeteredModel sums Usage and records one ModelCall however the call ends; the last
outcome per model; the usage table's totals; the owner's model choices picked per call by chat."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from bicameral.models.base import Message, ModelError, Stop, TextDelta, Usage, complete
from bicameral.models.chosen import ChosenModel, ModelChoices
from bicameral.models.metered import Meter, MeteredModel, ModelCall, ModelOutcomes
from bicameral.models.scope import current_chat
from bicameral.store.sql import SqlDatabase
from bicameral.store.usage import UsageStore


class Scripted:
    """Yields its events; then raises `error`, or waits on `hold` forever when given."""

    def __init__(self, name: str = "openai:scripted", *events, error: Exception | None = None, hold: bool = False):
        self.name = name
        self.events = events or (Usage(10, 5), TextDelta("hi"), Usage(0, 3, 2, 1), Stop("end_turn"))
        self.error = error
        self.hold = hold
        self.calls = 0
        self.closed = False
        self.inner_finished = False
        self.holding = asyncio.Event()

    async def aclose(self) -> None:
        self.closed = True

    async def stream(self, system, messages, tools, max_tokens):
        self.calls += 1
        try:
            for event in self.events:
                yield event
            if self.hold:
                self.holding.set()
                await asyncio.Event().wait()
            if self.error is not None:
                raise self.error
        finally:
            self.inner_finished = True


def metered(model, role: str = "back") -> tuple[MeteredModel, list[ModelCall]]:
    calls: list[ModelCall] = []
    return MeteredModel(model, role, calls.append, clock=lambda: 1000.0), calls


async def test_usage_is_summed_and_recorded_once_with_the_chat_and_role() -> None:
    model, calls = metered(Scripted())
    token = current_chat.set("telegram:1")
    try:
        completion = await complete(model, "sys", [Message.user("hi")], [], 100)
    finally:
        current_chat.reset(token)
    assert completion.text == "hi"
    assert calls == [ModelCall("openai:scripted", "back", "telegram:1", Usage(10, 8, 2, 1), "ok", 1000.0)]


async def test_a_model_error_is_recorded_with_its_kind_and_raised() -> None:
    model, calls = metered(Scripted("openai:x", Usage(7, 0), error=ModelError("rate_limit", "slow down")))
    with pytest.raises(ModelError):
        await complete(model, "sys", [Message.user("hi")], [], 100)
    assert [(c.outcome, c.usage, c.chat) for c in calls] == [("rate_limit", Usage(7, 0), None)]


async def test_another_exception_is_recorded_as_error() -> None:
    model, calls = metered(Scripted("openai:x", error=RuntimeError("bug")))
    with pytest.raises(RuntimeError):
        await complete(model, "sys", [Message.user("hi")], [], 100)
    assert [c.outcome for c in calls] == ["error"]


async def test_a_cancelled_call_is_recorded_as_cancelled() -> None:
    inner = Scripted("openai:x", Usage(3, 0), hold=True)
    model, calls = metered(inner)
    running = asyncio.create_task(complete(model, "sys", [Message.user("hi")], [], 100))
    await inner.holding.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert [(c.outcome, c.usage) for c in calls] == [("cancelled", Usage(3, 0))]


async def test_a_reader_that_stops_early_records_cancelled_and_closes_the_inner_stream() -> None:
    inner = Scripted()
    model, calls = metered(inner)
    stream = model.stream("sys", [], [], 100)
    assert await anext(stream) == Usage(10, 5)
    await stream.aclose()
    assert [c.outcome for c in calls] == ["cancelled"] and inner.inner_finished


async def test_a_failing_recorder_never_fails_the_call(caplog) -> None:
    def broken(call: ModelCall) -> None:
        raise OSError("disk full")

    model = MeteredModel(Scripted(), "front", broken)
    with caplog.at_level(logging.ERROR):
        completion = await complete(model, "sys", [], [], 10)
    assert completion.text == "hi" and "could not record" in caplog.text


async def test_the_meter_keeps_outcomes_and_survives_a_failing_store(caplog) -> None:
    def broken(call: ModelCall) -> None:
        raise OSError("disk full")

    meter = Meter(broken, clock=lambda: 500.0)
    with caplog.at_level(logging.ERROR):
        await complete(meter.wrap(Scripted("openai:a"), "front"), "", [], [], 10)
    outcome = meter.outcomes.get("openai:a")
    assert outcome is not None and outcome.last_ok == 500.0 and outcome.calls == 1
    assert "could not store the usage" in caplog.text


async def test_a_task_started_in_a_turn_counts_for_its_chat() -> None:
    """What a turn starts (a fact extraction, a spawned task) inherits the turn's chat; other chats are untouched."""
    seen: list[str | None] = []

    async def turn(chat: str) -> asyncio.Task[None]:
        current_chat.set(chat)

        async def later() -> None:
            await asyncio.sleep(0)
            seen.append(current_chat.get())

        return asyncio.create_task(later())

    first = await asyncio.create_task(turn("telegram:1"))
    second = await asyncio.create_task(turn("telegram:2"))
    await asyncio.gather(first, second)
    assert sorted(seen) == ["telegram:1", "telegram:2"] and current_chat.get() is None


def test_outcome_lines_name_the_last_answer_and_the_last_error() -> None:
    outcomes = ModelOutcomes()
    outcomes.note(ModelCall("openai:a", "back", None, Usage(), "ok", 1000.0))
    outcomes.note(ModelCall("openai:a", "back", None, Usage(), "rate_limit", 1100.0))
    outcomes.note(ModelCall("openai:b", "front", None, Usage(), "cancelled", 1100.0))
    outcomes.note(ModelCall("openai:c", "front", None, Usage(), "ok", 1150.0))
    assert outcomes.lines(now=1200.0, expected=["openai:c", "local"]) == [
        "local: no call since the start",
        "openai:a: 2 calls, last answered 3 min ago; last error 1 min ago (rate_limit)",
        "openai:c: 1 call, last answered 50 s ago; no errors",
    ]
    assert outcomes.lines(now=1200.0, when=lambda then, now: f"at {then:.0f}")[0].endswith("at 1100 (rate_limit)")
    assert outcomes.snapshot()["openai:a"].errors == 1


def test_a_configured_ref_matches_the_fuller_name_its_model_reports() -> None:
    outcomes = ModelOutcomes()
    outcomes.note(ModelCall("local:SmolLM2-135M-Instruct.gguf", "single", None, Usage(), "ok", 1000.0))
    assert outcomes.lines(now=1010.0, expected=["local", "openai:gpt"]) == [
        "openai:gpt: no call since the start",
        "local:SmolLM2-135M-Instruct.gguf: 1 call, last answered 10 s ago; no errors",
    ]


def test_usage_totals_add_up_by_the_columns_asked_for(database: SqlDatabase) -> None:
    store = UsageStore(database)
    rows = [
        (100.0, "openai:a", "back", "c1", 10, 1, "ok"),
        (200.0, "openai:a", "back", "c2", 20, 2, "rate_limit"),
        (300.0, "openai:b", "front", "c1", 5, 5, "ok"),
        (50.0, "openai:a", "back", "c1", 999, 999, "ok"),  # before `since`
    ]
    for at, model, role, chat, tokens_in, tokens_out, outcome in rows:
        store.record(at=at, model=model, role=role, chat=chat, input_tokens=tokens_in, output_tokens=tokens_out,
                     cache_read_tokens=1, cache_write_tokens=0, outcome=outcome)
    by_model = {t.model: t for t in store.totals(100.0)}
    assert by_model["openai:a"].calls == 2 and by_model["openai:a"].failed == 1
    assert (by_model["openai:a"].input_tokens, by_model["openai:a"].output_tokens) == (30, 3)
    assert by_model["openai:a"].cache_read_tokens == 2 and by_model["openai:a"].chat is None
    by_chat = {t.chat: t.input_tokens for t in store.totals(100.0, group_by=("chat",))}
    assert by_chat == {"c1": 15, "c2": 20}
    assert len(store.totals(100.0, group_by=("model", "role", "chat"))) == 3
    assert store.totals(400.0) == []
    with pytest.raises(ValueError):
        store.totals(0.0, group_by=("model; DROP TABLE model_usage",))  # type: ignore[list-item]


def test_model_choices_prefer_the_chat_then_the_global_choice_and_are_saved_whole() -> None:
    saved: list[str] = []
    choices = ModelChoices(None, save=saved.append)
    assert choices.chosen("back", "c1") is None
    choices.choose("back", "openai:g")
    choices.choose("back", "openai:here", "c1")
    assert choices.chosen("back", "c1") == "openai:here"
    assert choices.chosen("back", "c2") == choices.chosen("back", None) == "openai:g"
    assert choices.chosen("front", "c1") is None and choices.chats_choosing("back") == ["c1"]
    again = ModelChoices(saved[-1])
    assert again.chosen("back", "c1") == "openai:here" and json.loads(saved[-1]) == {"back": "openai:g", "back@c1": "openai:here"}
    again.choose("back", None, "c1")
    assert again.chosen("back", "c1") == "openai:g"
    assert ModelChoices("not json").chosen("back", None) is None
    assert ModelChoices('["a list"]').chosen("back", None) is None


def test_a_choice_that_cannot_be_saved_is_not_made() -> None:
    def full(text: str) -> None:
        raise OSError("disk full")

    choices = ModelChoices(None, save=full)
    with pytest.raises(OSError):
        choices.choose("back", "openai:x")
    assert choices.chosen("back", None) is None


async def test_the_chosen_model_is_picked_per_call_by_the_calling_chat_and_built_once() -> None:
    default = Scripted("openai:default")
    built: list[Scripted] = []

    def build(ref: str) -> Scripted:
        built.append(Scripted(ref))
        return built[-1]

    choices = ModelChoices()
    model = ChosenModel("back", default, choices, build)
    await complete(model, "", [], [], 10)
    choices.choose("back", "openai:mine", "c1")
    for chat in ("c1", "c2", "c1"):
        token = current_chat.set(chat)
        try:
            await complete(model, "", [], [], 10)
        finally:
            current_chat.reset(token)
    assert default.calls == 2 and [(m.name, m.calls) for m in built] == [("openai:mine", 2)]
    await model.aclose()
    assert built[0].closed and not default.closed


async def test_a_chosen_model_that_cannot_be_built_fails_the_call_as_a_model_error() -> None:
    def build(ref: str) -> Scripted:
        raise ValueError("no such thing")

    choices = ModelChoices()
    choices.choose("front", "openai:broken")
    with pytest.raises(ModelError) as failed:
        await complete(ChosenModel("front", Scripted(), choices, build), "", [], [], 10)
    assert failed.value.kind == "bad_request"


async def test_a_tasks_model_calls_count_for_its_chat_however_it_was_started(tmp_path, database_location) -> None:
    """The bus sets the task's chat in the task's own asyncio task: spawned anywhere, or resumed at start."""
    from bicameral.store import Stores
    from bicameral.tasks.bus import TaskBus
    from bicameral.tasks.executor import Executor
    from bicameral.tasks.store import TaskStore
    from bicameral.tasks.task import TaskOutcome

    class Seeing(Executor):
        def __init__(self) -> None:
            self.seen: list[str | None] = []
            self.ran = asyncio.Event()

        async def run(self, task, control):
            self.seen.append(current_chat.get())
            self.ran.set()
            await asyncio.Event().wait()  # stays open: the next bus resumes it
            return TaskOutcome(result="done")

    async def nothing(task, event) -> None:
        return None

    stores = Stores.open(database_location, data_dir=tmp_path)
    first = Seeing()
    bus = TaskBus(TaskStore(stores.db), first, on_event=nothing)
    token = current_chat.set("telegram:elsewhere")
    try:
        await bus.spawn("telegram:1", "do it")
    finally:
        current_chat.reset(token)
    await asyncio.wait_for(first.ran.wait(), 10)
    await bus.close()
    second = Seeing()
    again = TaskBus(TaskStore(stores.db), second, on_event=nothing)
    assert await again.resume_open() == 1
    await asyncio.wait_for(second.ran.wait(), 10)
    await again.close()
    stores.close()
    assert first.seen == second.seen == ["telegram:1"] and current_chat.get() is None
