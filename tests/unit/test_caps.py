"""Spending caps' counters and attribution: whose words a call carries (a turn's, a task's), the per-day counters
loaded from the usage record and added to by each call, the owner's exemption from the per-person cap, allowances,
a new UTC day, and a refused call that never reaches the model."""

from __future__ import annotations

import asyncio

import pytest

from bicameral.events import Authority, Role
from bicameral.failures import failure_sentence
from bicameral.models.base import Message, ModelError, Usage, complete
from bicameral.models.caps import EVERYONE, Refusal, SpendingCaps, utc_day
from bicameral.models.metered import CAP, Meter, ModelCall
from bicameral.models.scope import Spender, current_spender, enter
from bicameral.store import Stores
from bicameral.tasks.bus import TaskBus
from bicameral.tasks.executor import Executor
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import TaskOutcome
from tests.unit.test_metering import Scripted

OWNER_ID = 1
OWNER, ANN, BEN = "telegram:1", "telegram:2", "telegram:3"
NOON = 1_800_000_000.0 - 1_800_000_000.0 % 86400 + 43200  # 12:00 UTC of some day


def _caps(stores: Stores, now: list[float], *, per_user: int | None = 100, everyone: int | None = None) -> SpendingCaps:
    return SpendingCaps(
        per_user=per_user, everyone=everyone, owner_id=OWNER_ID, load_spend=stores.caps.spend_since,
        load_allowances=stores.caps.allowances, clock=lambda: now[0],
    )


def _record(stores: Stores, at: float, tokens: int, *people: str) -> None:
    stores.usage.record(
        at=at, model="m", role="single", chat="c", input_tokens=tokens, output_tokens=0, cache_read_tokens=0,
        cache_write_tokens=0, outcome="ok", people=" ".join(people) or None,
    )


def _call(at: float, tokens: int, *people: str) -> ModelCall:
    return ModelCall("m", "single", "c", Usage(tokens, 0), "ok", at, people=people)


@pytest.fixture
def stores(tmp_path, database_location):
    opened = Stores.open(database_location, data_dir=tmp_path)
    yield opened
    opened.close()


def test_the_counters_start_from_the_record_and_add_each_call(stores) -> None:
    now = [NOON]
    _record(stores, NOON - 86400, 500, ANN)  # yesterday: not counted
    _record(stores, NOON - 60, 60, ANN, BEN)  # a call both caused counts in full for each
    caps = _caps(stores, now)
    assert caps.check((ANN,)) is None
    caps.note(_call(NOON, 40, ANN))
    assert caps.check((ANN,)) == Refusal(ANN, 100, 100)
    assert caps.check((BEN,)) is None and caps.today() == (utc_day(NOON)[0], 100, {ANN: 100, BEN: 60})


def test_the_owner_is_exempt_from_the_per_person_cap_but_counts_for_everyones(stores) -> None:
    now = [NOON]
    caps = _caps(stores, now, everyone=150)
    caps.check(())
    caps.note(_call(NOON, 120, OWNER))
    assert caps.check((OWNER,)) is None
    caps.note(_call(NOON, 30, OWNER))
    assert caps.check((OWNER,)) == Refusal(None, 150, 150)
    assert caps.check(()) == Refusal(None, 150, 150), "a call for no one counts against everyone's cap"


def test_allowances_raise_the_limit_for_the_day_and_a_new_day_resets(stores) -> None:
    now = [NOON]
    caps = _caps(stores, now)
    told: list[Refusal] = []
    caps.on_refusal = told.append
    caps.check(())
    caps.note(_call(NOON, 100, ANN))
    assert caps.check((ANN,)) is not None and caps.check((ANN,), tell=False) is not None and len(told) == 1
    stores.caps.allow(caps.day, ANN, 100)
    caps.refresh()
    assert caps.check((ANN,)) is None and caps.limit(ANN, 100) == 200
    stores.caps.allow(caps.day, EVERYONE, None)
    caps.refresh()
    assert caps.limit(EVERYONE, 5) is None
    now[0] += 86400
    assert caps.check((ANN,)) is None and caps.today()[1:] == (0, {})
    assert caps.limit(ANN, 100) == 100, "an allowance is for its day only"


async def test_a_refused_call_never_reaches_the_model_and_marks_the_run(stores) -> None:
    now = [NOON]
    caps = _caps(stores, now)
    recorded: list[ModelCall] = []
    meter = Meter(recorded.append, clock=lambda: now[0], check=caps.refusal_text, count=caps.note)
    inner = Scripted("openai:m", Usage(150, 0))
    model = meter.wrap(inner, "single")

    async def run() -> Spender:
        spender = enter("telegram:2", (ANN,))
        await complete(model, "sys", [Message.user("hi")], [], 10)
        with pytest.raises(ModelError) as refused:
            await complete(model, "sys", [Message.user("again")], [], 10)
        assert refused.value.kind == CAP
        return spender

    spender = await asyncio.create_task(run())
    assert inner.calls == 1 and len(recorded) == 1 and recorded[0].people == (ANN,)
    assert spender.refused is not None and "150 of 100" in spender.refused
    assert current_spender.get() is None, "set in the run's own task only"


async def test_a_task_carries_its_authors_people(stores) -> None:
    seen: list[tuple[str, ...]] = []
    ran = asyncio.Event()

    class Seeing(Executor):
        async def run(self, task, control):
            spender = current_spender.get()
            seen.append(spender.people if spender is not None else ())
            ran.set()
            return TaskOutcome(result="done")

    async def nothing(task, event) -> None:
        return None

    bus = TaskBus(TaskStore(stores.db), Seeing(), on_event=nothing)
    await bus.spawn("telegram:-5", "do it", authority=Authority.of(Role.MEMBER, (BEN, ANN)))
    await asyncio.wait_for(ran.wait(), 10)
    await bus.finish()
    assert seen == [(ANN, BEN)]


async def test_a_claude_code_task_over_a_cap_starts_no_cli_turn(stores, tmp_path) -> None:
    from bicameral.app import claude_code_config
    from bicameral.claude_code.executor import ClaudeCodeExecutor
    from bicameral.config import Settings
    from bicameral.tasks.task import Task, TaskState
    from bicameral.tools.registry import ToolRegistry

    settings = Settings.for_test(tmp_path, back_model="claude-code:sonnet", claude_bin=str(tmp_path / "no-such-claude"))
    asked: list[tuple[str, ...]] = []

    def over(people: tuple[str, ...]) -> str | None:
        asked.append(people)
        return "telegram:2's daily cap is reached"

    executor = ClaudeCodeExecutor(claude_code_config(settings), stores, ToolRegistry([]), check=over)
    task = Task(id="t1", chat="telegram:2", spec="x", state=TaskState.RUNNING, created_at=0.0, updated_at=0.0)

    async def run() -> TaskOutcome:
        enter("telegram:2", (ANN,))
        return await executor.run(task, control=None)  # type: ignore[arg-type]  # refused before it is used

    outcome = await asyncio.create_task(run())
    assert asked == [(ANN,)]
    assert (outcome.error_kind, outcome.retryable) == (CAP, False) and outcome.error == failure_sentence(CAP)


def test_another_workers_spending_and_allowances_count_once_read_again(stores) -> None:
    """Two workers on one database: what the other spent and the owner allowed counts here after `reread`."""
    now = [NOON]
    here, there = _caps(stores, now), _caps(stores, now)
    assert here.check((ANN,)) is None and there.check((ANN,)) is None
    _record(stores, NOON, 100, ANN)  # spent by a call on the other worker (its meter records every call)
    there.note(_call(NOON, 100, ANN))
    assert there.check((ANN,), tell=False) is not None
    assert here.check((ANN,), tell=False) is None  # not yet read here
    here.reread()
    assert here.check((ANN,), tell=False) == Refusal(ANN, 100, 100)
    stores.caps.allow(utc_day(NOON)[0], ANN, 50)  # the owner's press, taken by the other worker
    here.reread()
    assert here.check((ANN,), tell=False) is None
