"""`sub_agent` end to end on the scripted model server: a restricted fresh loop, its own cap, cancelled with its caller."""

from __future__ import annotations

import pytest

from bicameral.agent.subagent import restricted_tools
from bicameral.tools.registry import ToolRegistry, discover_tools
from bicameral.tools.subagent import SUB_AGENT_TOOLS, SubAgent
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access

HELPER = "You are a helper agent"
FORBIDDEN = ("send_message", "reply_to_message", "react", "schedule_create", "remember", "forget", "record_learning",
             "instructions_write", "sub_agent")
STRANGER = 3003


def is_helper(req: Request) -> bool:
    return HELPER in req.system


def delegating(helper_turns: list[Reply], task: str = "look up the time") -> tuple[list[Request], object]:
    """A model that delegates once, plays `helper_turns` to the sub-agent, then repeats the sub-agent's answer."""
    seen: list[Request] = []
    turns = list(helper_turns)

    def respond(req: Request) -> Reply:
        seen.append(req)
        if is_helper(req):
            return turns.pop(0) if turns else Reply(text="helper: out of script")
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCall("sub_agent", {"task": task})])
        return Reply(text=f"parent got: {results[0]['content']}")

    return seen, respond


async def test_the_sub_agent_uses_an_allowed_tool_and_its_answer_reaches_the_user(telegram, models, start_bot):
    seen, respond = delegating([Reply(tool_calls=[ToolCall("current_time", {})]), Reply(text="it is tea time")])
    models.responder(respond)
    await start_bot()
    telegram.user_sends(OWNER, "what time is it? ask a helper")
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    assert sent[-1]["text"] == "parent got: it is tea time"
    helper = [r for r in seen if is_helper(r)]
    assert len(helper) == 2
    assert helper[0].last_user_text() == "look up the time"  # a fresh loop: the task and nothing of the chat
    assert "unknown tool" not in helper[1].tool_results()[0]["content"]
    offered = set(helper[0].tool_names)
    assert "current_time" in offered and "write_file" in offered  # the owner's own tools stay the owner's
    assert not offered & set(FORBIDDEN)
    assert offered <= SUB_AGENT_TOOLS


async def test_a_forbidden_tool_is_not_offered_and_asking_for_it_is_an_error(telegram, models, start_bot):
    calls = [ToolCall("send_message", {"text": "hi from the helper"}), ToolCall("remember", {"fact": "x"}),
             ToolCall("schedule_create", {"text": "x", "when": "in 1 minute"}), ToolCall("sub_agent", {"task": "again"})]
    seen, respond = delegating([Reply(tool_calls=calls), Reply(text="could not do it")])
    models.responder(respond)
    app = await start_bot(tool_error_max_count=10)  # four refusals in one step: let them all through the breaker
    telegram.user_sends(OWNER, "delegate something")
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    assert sent[-1]["text"] == "parent got: could not do it"
    helper = [r for r in seen if is_helper(r)]
    results = helper[1].tool_results()
    assert len(results) == 4 and all("unknown tool" in r["content"] for r in results)
    assert len(telegram.sent_messages(OWNER)) == 1  # only the parent's answer: the helper sent nothing
    ran = {row["name"] for row in app.stores.tool_calls.recent(chat=f"telegram:{OWNER}")}
    assert ran == {"sub_agent", "send_message", "remember", "schedule_create"}  # audited as refused, none ran


async def test_a_non_owner_s_sub_agent_gets_no_owner_only_tools(telegram, models, start_bot, make_settings):
    write_access(make_settings(), policy="open")
    seen, respond = delegating([Reply(tool_calls=[ToolCall("run", {"command": "id"})]), Reply(text="no shell")])
    models.responder(respond)
    await start_bot()
    telegram.user_sends(STRANGER, "delegate a shell command")
    await telegram.await_sent(STRANGER, 1, timeout=30)
    helper = [r for r in seen if is_helper(r)]
    assert "web_fetch" in helper[0].tool_names and not {"run", "write_file", "read_file"} & set(helper[0].tool_names)
    (result,) = helper[1].tool_results()
    assert "only for the owner" in result["content"]


async def test_the_sub_agent_stops_at_its_own_step_limit(telegram, models, start_bot):
    zones = ["UTC", "Europe/Paris", "Asia/Tokyo", "America/Lima", "Africa/Accra", "Europe/Oslo"]
    forever = [Reply(tool_calls=[ToolCall("current_time", {"timezone": zone})]) for zone in zones]  # never the same call
    seen, respond = delegating(forever)
    models.responder(respond)
    await start_bot(sub_agent_max_iterations=3)
    telegram.user_sends(OWNER, "delegate a loop")
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    assert len([r for r in seen if is_helper(r)]) == 3
    assert "the sub-agent stopped because it hit the step limit" in sent[-1]["text"]


async def test_stopping_the_caller_stops_the_sub_agent(telegram, models, start_bot):
    # The helper's second step would run a tool; it must never run once the caller's turn is stopped.
    _seen, respond = delegating([Reply(tool_calls=[ToolCall("current_time", {})], latency=2)])
    models.responder(respond)
    app = await start_bot(debounce_ms=0)
    telegram.user_sends(OWNER, "delegate something slow")
    await models.await_requests(2)  # the caller's step and the helper's first, still being answered
    assert is_helper(models.requests[1])
    telegram.user_sends(OWNER, "/stop")
    assert (await telegram.await_sent(OWNER, 1))[0]["text"] == "Stopped."
    await models.await_completed(2)  # the helper's answer arrived: had it lived on, its tool would run now
    models.responder(lambda req: Reply(text="still here"))
    telegram.user_sends(OWNER, "are you there?")
    await telegram.await_sent(OWNER, 2)
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["Stopped.", "still here"]
    assert len(models.requests) == 3 and not is_helper(models.requests[2])
    assert "current_time" not in [row["name"] for row in app.stores.tool_calls.recent(chat=f"telegram:{OWNER}")]


def test_the_restricted_set_is_named_and_holds_no_side_effects():
    registry = ToolRegistry([*discover_tools(), SubAgent()])
    kept = set(restricted_tools(registry).names())
    assert kept <= SUB_AGENT_TOOLS
    assert not kept & set(FORBIDDEN)
    assert not any(registry.get(name).messaging for name in kept)
    assert {"web_fetch", "web_search", "read_file", "current_time"} <= kept


@pytest.mark.parametrize("mode", ["single", "bicameral"])
async def test_every_native_mode_offers_sub_agent(start_bot, mode):
    app = await start_bot(mode=mode)
    assert "sub_agent" in app.registry.names()


async def test_cancelling_the_task_cancels_its_sub_agent(telegram, models, start_bot):
    from tests.e2e.test_bicameral import FAST, _follow_up

    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Delegate the research.", "label": "research"}),
                          ToolCall("reply", {"text": "on it"})]),
        Reply(tool_calls=[ToolCall("cancel", {"task": "research"})]),
        model="front",
    )
    # The back delegates; the helper's first step answers slowly with a tool call that must never run.
    models.script(
        Reply(tool_calls=[ToolCall("sub_agent", {"task": "find the answer"})]),
        Reply(tool_calls=[ToolCall("current_time", {})], latency=2),
        Reply(text="finished"),
        model="back",
    )
    app = await start_bot(**FAST)
    telegram.user_sends(OWNER, "research this")
    await telegram.await_sent(OWNER, 1)
    helper = await models.await_requests(2, model="back", timeout=20)
    assert is_helper(helper[1])
    telegram.user_sends(OWNER, "nvm")
    sent = await telegram.await_sent(OWNER, 2)
    assert sent[1]["text"] == "Stopped research."
    assert app.tasks.for_chat(f"telegram:{OWNER}")[0].state.value == "cancelled"
    await models.await_completed(len(models.requests))  # the helper's slow answer is in: had it lived on, it would act
    await _follow_up(telegram, models)
    assert len(models.requests_for("back")) == 2
    assert "current_time" not in [row["name"] for row in app.stores.tool_calls.recent(chat=f"telegram:{OWNER}")]
