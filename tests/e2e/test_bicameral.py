"""Two chambers end to end: the front talks, the back works, the task bus between them."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import psutil
from pydantic import BaseModel

from bicameral.tools.base import Tool, ToolContext, ToolResult
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access
from tests.support.chat import eventually, until_sent
from tests.support.process import run_process

FAST = dict(mode="bicameral", delivery_pause_scale=0, debounce_ms=150, task_retry_delay_seconds=0)


def _is_voice_pass(req: Request) -> bool:
    return "Rephrase the text" in req.system or "Rewrite its result" in req.system


def _triage(models) -> list[Request]:
    return [r for r in models.requests_for("front") if not _is_voice_pass(r)]


def _voice_echo(req: Request) -> Reply:
    """The front's voice passes: keep the content, add a touch of voice."""
    return Reply(text="Here you go: " + req.last_user_text().split("<result>")[-1].split("</result>")[0].strip())


def _task_spec(req: Request) -> str:
    """The spec inside the back request's <task> brief (the context slice is not part of it)."""
    text = json.dumps(req.messages)
    return text.split("<task", 1)[1].split("</task>", 1)[0] if "<task" in text else ""


def _texts(telegram, chat=OWNER) -> list[str]:
    return [m["text"] for m in telegram.sent_messages(chat)]


async def _follow_up(telegram, models, chat: int = OWNER) -> None:
    """Send one more message and wait for its reply: whatever an earlier turn would have sent is out by then."""
    models.script(Reply(text="(follow-up answered)"), model="front")
    telegram.user_sends(chat, "one more thing")
    await until_sent(telegram, chat, "(follow-up answered)")
    assert _texts(telegram, chat)[-1] == "(follow-up answered)"


async def test_acceptance_scenario_three_messages_in_five_seconds(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[
            ToolCall("spawn", {"spec": "Pull yesterday's logs and grep for errors.", "label": "logs"}),
            ToolCall("redirect", {"task": "logs", "spec": "Pull yesterday's auth service logs only and grep for errors."}),
            ToolCall("branch", {"task": "logs", "spec": "Check if yesterday's deploy went through.", "label": "deploy"}),
            ToolCall("reply", {"text": "on it -- auth-service logs coming up, checking the deploy too"}),
        ]),
        model="front",
    )
    models.responder(_voice_echo, model="front")

    def back(req: Request) -> Reply:
        brief = _task_spec(req)
        if "deploy" in brief:
            return Reply(text="Deploy 4812 went through at 09:12 UTC.", latency=0.3)
        if "auth service" in brief:
            return Reply(text="Auth service: 3 errors, all upstream timeouts.", latency=0.6)
        return Reply(text="All services: 250 errors.", latency=3)

    models.responder(back, model="back")
    await start_bot(**{**FAST, "debounce_ms": 2500})
    telegram.user_sends(OWNER, "can you pull yesterday's logs and grep for errors")
    await asyncio.sleep(2.0)  # the user's pace, inside the debounce window
    telegram.user_sends(OWNER, "actually scratch that -- just the auth service")
    await asyncio.sleep(2.0)  # the user's pace again: each message restarts the debounce window
    telegram.user_sends(OWNER, "and also btw can you check if the deploy went through")
    await telegram.await_sent(OWNER, 3, timeout=20)
    await eventually(lambda: all(r.completed_at for r in models.requests_for("back")))
    triage = _triage(models)
    await _follow_up(telegram, models)

    texts = _texts(telegram)[:3]
    assert len(triage) == 1, "one front turn sees the whole burst"
    burst = triage[0].last_user_text()
    assert "grep for errors" in burst and "just the auth service" in burst and "deploy went through" in burst
    assert texts[0] == "on it -- auth-service logs coming up, checking the deploy too"
    assert len(texts) == 3, texts
    assert any("3 errors" in t for t in texts[1:]) and any("4812" in t for t in texts[1:])
    assert not any("250 errors" in t for t in texts)
    assert all(t.startswith("Here you go") for t in texts[1:]), "results arrive framed in the front's voice"
    app_requests = [json.dumps(r.messages) for r in models.requests_for("back")]
    assert any("The user changed what they want" in r for r in app_requests), "A pivoted, keeping its transcript"


async def test_trivial_message_makes_no_back_request(telegram, models, start_bot):
    models.script(Reply(text="hey! what's up?"), model="front")
    await start_bot(**FAST)
    telegram.user_sends(OWNER, "hey")
    sent = await telegram.await_sent(OWNER, 1)
    await _follow_up(telegram, models)
    assert sent[0]["text"] == "hey! what's up?"
    assert models.requests_for("back") == []


async def test_a_quick_answer_with_pacing_off_costs_no_typing_call(telegram, models, start_bot):
    models.script(Reply(text="hey! what's up?"), model="front")
    await start_bot(**FAST, typing_delay_seconds=30)  # longer than this turn can take, however loaded the machine
    telegram.user_sends(OWNER, "hey")
    await telegram.await_sent(OWNER, 1)
    # Typing would have preceded the reply: neither the turn's indicator nor the delivery's pause sent one.
    assert telegram.chat_actions(OWNER) == []


async def test_thanks_gets_a_reaction_only(telegram, models, start_bot):
    models.script(Reply(tool_calls=[ToolCall("react", {"message_id": "1", "emoji": "❤"})]), model="front")
    await start_bot(**FAST)
    telegram.user_sends(OWNER, "thanks!")
    await eventually(lambda: telegram.reactions(OWNER))
    assert models.requests_for("back") == []
    assert telegram.sent_messages(OWNER) == []


async def test_status_with_no_task_invents_nothing(telegram, models, start_bot):
    models.script(Reply(text="Going great, almost done!", tool_calls=[ToolCall("status", {})]), model="front")
    await start_bot(**FAST)
    telegram.user_sends(OWNER, "how's it going?")
    sent = await telegram.await_sent(OWNER, 1)
    await _follow_up(telegram, models)
    assert sent[0]["text"] == "Nothing is running right now."
    assert _texts(telegram)[:-1] == ["Nothing is running right now."], "the front's invented progress is never sent"


async def test_status_mid_task_reports_the_real_last_event(telegram, models, start_bot):
    models.script(
        Reply(
            tool_calls=[
                ToolCall("spawn", {"spec": "Find the time in Tokyo.", "label": "tokyo"}),
                ToolCall("reply", {"text": "on it"}),
            ]
        ),
        Reply(tool_calls=[ToolCall("status", {"task": "tokyo"})]),
        model="front",
    )
    models.responder(_voice_echo, model="front")
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {"timezone": "Asia/Tokyo"})]),
        Reply(text="It is late evening in Tokyo.", latency=3),
        model="back",
    )
    await start_bot(**FAST, progress_interval_seconds=0)
    telegram.user_sends(OWNER, "what time is it in tokyo")
    await telegram.await_sent(OWNER, 1)
    await models.await_requests(2, model="back")
    telegram.user_sends(OWNER, "how's it going?")
    status = (await telegram.await_sent(OWNER, 2))[1]["text"]
    assert "tokyo" in status and "last step: current_time(timezone=Asia/Tokyo)" in status


class SleepArgs(BaseModel):
    seconds: int = 30


class SlowCommand(Tool):
    """A tool that runs a real subprocess, so cancellation can be checked against the process table."""

    name = "slow_command"
    description = "Run a slow command."
    args_model = SleepArgs
    pid_file: Path

    async def run(self, args: SleepArgs, ctx: ToolContext) -> ToolResult:
        result = await run_process(["sh", "-c", f"echo $$ > {self.pid_file}; exec sleep {args.seconds}"], timeout=60)
        return ToolResult(result.stdout or "done")


async def test_cancel_mid_tool_kills_the_subprocess_and_tells_the_user(telegram, models, start_bot, tmp_path):
    tool = SlowCommand()
    tool.pid_file = tmp_path / "pid"
    models.script(
        Reply(
            tool_calls=[
                ToolCall("spawn", {"spec": "Run the slow job.", "label": "slow job"}),
                ToolCall("reply", {"text": "starting it"}),
            ]
        ),
        Reply(tool_calls=[ToolCall("cancel", {"task": "slow job"})]),
        model="front",
    )
    models.script(Reply(tool_calls=[ToolCall("slow_command", {"seconds": 30})]), Reply(text="finished"), model="back")
    app = await start_bot(**FAST, extra_tools=[tool])
    telegram.user_sends(OWNER, "run the slow job")
    await telegram.await_sent(OWNER, 1)
    await eventually(lambda: tool.pid_file.exists() and tool.pid_file.read_text().strip())
    pid = int(tool.pid_file.read_text())
    assert psutil.pid_exists(pid)
    telegram.user_sends(OWNER, "nvm")
    sent = await telegram.await_sent(OWNER, 2)
    assert sent[1]["text"] == "Stopped slow job."
    # By the time the user is told, the tool's process is gone (the bus waits at most 1 s for it).
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    task = app.tasks.for_chat(f"telegram:{OWNER}")[0]
    assert task.state.value == "cancelled"
    await _follow_up(telegram, models)
    assert "finished" not in " ".join(_texts(telegram))


async def test_restart_with_a_task_running_resumes_from_its_checkpoint_and_delivers_once(telegram, models, start_bot):
    models.script(
        Reply(
            tool_calls=[
                ToolCall("spawn", {"spec": "What time is it in UTC?", "label": "clock"}),
                ToolCall("reply", {"text": "checking"}),
            ]
        ),
        model="front",
    )
    models.responder(_voice_echo, model="front")
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {})]),
        Reply(text="never delivered", latency=10),
        Reply(text="It is 12:00 UTC."),
        model="back",
    )
    app = await start_bot(**FAST)
    telegram.user_sends(OWNER, "what time is it?")
    await telegram.await_sent(OWNER, 1)
    await models.await_requests(2, model="back")
    await app.stop()
    await start_bot(**FAST)
    await telegram.await_sent(OWNER, 2, timeout=15)
    await _follow_up(telegram, models)
    texts = _texts(telegram)[:-1]
    assert texts[1] == "Here you go: It is 12:00 UTC."
    assert len(texts) == 2
    resumed = models.requests_for("back")[2]
    assert resumed.tool_results(), "the resumed run starts from the checkpoint, with the finished tool step"


async def test_overheard_group_exchange_gets_no_reply(telegram, models, start_bot, make_settings):
    group = -100300
    write_access(make_settings(), policy="open")
    app = await start_bot(**FAST)
    dev = {"chat_type": "supergroup", "chat_title": "Dev"}
    telegram.user_sends(group, "did you push the fix?", user_id=2001, first_name="Ann", **dev)
    telegram.user_sends(group, "yes, deploying now", user_id=2002, first_name="Ben", **dev)
    telegram.user_sends(group, "great, thanks Ben", user_id=2001, first_name="Ann", **dev)
    await eventually(lambda: len(app.stores.messages.recent(f"telegram:{group}")) == 3)
    addressed_at = time.monotonic()
    models.script(Reply(text="sounds like it's shipping"), model="front")
    telegram.user_sends(group, "@bicameral_test_bot all good?", user_id=2001, first_name="Ann", **dev)
    await telegram.await_sent(group, 1)
    # The addressed message's turn is the only one: the three before it were only overheard.
    (turn,) = models.requests
    assert "all good?" in turn.last_user_text() and 'overheard="true">great, thanks Ben</msg>' in turn.last_user_text()
    assert _texts(telegram, group) == ["sounds like it's shipping"]
    typing = [c for c in telegram.calls if c.method == "sendChatAction"]
    assert all(c.ts > addressed_at for c in typing), "no typing for overheard talk"


async def test_group_addressed_turn_sees_overheard_context_and_quotes_the_addressee(telegram, models, start_bot, make_settings):
    group = -100301
    models.script(Reply(text="Ben said he's deploying now."), model="front")
    write_access(make_settings(), policy="open")
    app = await start_bot(**FAST)
    telegram.user_sends(group, "yes, deploying now", user_id=2002, first_name="Ben", chat_type="supergroup", chat_title="Dev")
    await eventually(lambda: app.stores.messages.recent(f"telegram:{group}"))
    dev = {"chat_type": "supergroup", "chat_title": "Dev"}
    msg = telegram.user_sends(group, "@bicameral_test_bot what did Ben say?", user_id=2001, first_name="Ann", **dev)
    sent = await telegram.await_sent(group, 1)
    earlier = 'from="Ben" sender="telegram:2002" role="member" overheard="true">yes, deploying now</msg>'
    assert earlier in models.requests_for("front")[0].last_user_text()
    quoted = sent[0]["params"].get("reply_parameters")
    assert quoted and str(msg["message_id"]) in json.dumps(quoted)


async def test_back_failure_is_translated_never_raw(telegram, models, start_bot):
    models.script(
        Reply(
            tool_calls=[
                ToolCall("spawn", {"spec": "Summarize the report.", "label": "report"}),
                ToolCall("reply", {"text": "on it"}),
            ]
        ),
        model="front",
    )
    models.responder(lambda req: Reply(error_status=500, error_message="internal kaboom xyz"), model="back")
    await start_bot(**FAST, model_max_retries=0)
    telegram.user_sends(OWNER, "summarize the report")
    await telegram.await_sent(OWNER, 3, timeout=15)
    texts = _texts(telegram)
    assert texts[1].startswith("Hit a snag with report, retrying")
    assert texts[2].startswith("I couldn't finish report:")
    assert not any("kaboom" in t or "500" in t for t in texts)


async def test_long_result_is_framed_and_arrives_as_natural_messages(telegram, models, start_bot):
    paragraphs = [f"Finding {i}: " + "the service answered slowly under load. " * 8 for i in range(6)]
    long_result = "\n\n".join(paragraphs)
    models.script(
        Reply(
            tool_calls=[
                ToolCall("spawn", {"spec": "Write the load-test report.", "label": "report"}),
                ToolCall("reply", {"text": "writing it up"}),
            ]
        ),
        model="front",
    )
    models.responder(lambda req: Reply(text="So, the load test is done.\n\n" + long_result), model="front")
    models.script(Reply(text=long_result), model="back")
    await start_bot(**FAST)
    telegram.user_sends(OWNER, "write the load test report")
    await telegram.await_sent(OWNER, 3, timeout=15)
    await _follow_up(telegram, models)
    texts = _texts(telegram)[1:-1]
    assert 2 <= len(texts) <= 3
    assert texts[0].startswith("So, the load test is done.")
    assert all(f"Finding {i}:" in " ".join(texts) for i in range(6))
    frame_requests = [r for r in models.requests_for("front") if "Rewrite its result" in r.system]
    assert len(frame_requests) == 1


async def test_finished_while_away_is_reintroduced_when_the_user_returns(telegram, models, start_bot):
    models.script(
        Reply(
            tool_calls=[
                ToolCall("spawn", {"spec": "Book-keeping export.", "label": "the export"}),
                ToolCall("reply", {"text": "on it"}),
            ]
        ),
        Reply(text="oh hey!"),
        model="front",
    )
    models.responder(lambda req: Reply(text="The export is ready: 42 rows."), model="front")
    models.script(Reply(text="Export ready: 42 rows.", latency=1.5), model="back")
    app = await start_bot(**FAST, away_after_seconds=1.0)
    telegram.user_sends(OWNER, "export the books")
    await telegram.await_sent(OWNER, 1)
    await eventually(lambda: app.tasks.for_chat(f"telegram:{OWNER}")[0].state.value == "completed")
    # Had the result gone out now, it would stand before the greeting below.
    assert len(telegram.sent_messages(OWNER)) == 1, "held while the user is away"
    telegram.user_sends(OWNER, "hi again")
    await telegram.await_sent(OWNER, 3)
    texts = _texts(telegram)
    assert texts[1] == "oh hey!"
    assert "finished the export" in texts[2] and "42 rows" in texts[2]


async def test_a_burst_that_goes_quiet_mid_thought_gets_a_question(telegram, models, start_bot):
    question = ToolCall("wait_for_more", {"question": "Still on the first thing, or moving on?"})
    models.script(Reply(tool_calls=[question]), model="front")
    await start_bot(**FAST, burst_followup_seconds=0.8)
    telegram.user_sends(OWNER, "ok so first thing:")
    sent = await telegram.await_sent(OWNER, 1, timeout=5)
    assert sent[0]["text"] == "Still on the first thing, or moving on?"
    assert models.requests_for("back") == []


async def test_long_task_sends_status_notes(telegram, models, start_bot):
    models.script(
        Reply(
            tool_calls=[
                ToolCall("spawn", {"spec": "Crunch the numbers.", "label": "crunching"}),
                ToolCall("reply", {"text": "on it"}),
            ]
        ),
        model="front",
    )
    models.script(Reply(text="done: 7", latency=4), model="back")
    models.responder(_voice_echo, model="front")
    await start_bot(**FAST, status_interval_seconds=1.2)
    telegram.user_sends(OWNER, "crunch the numbers")
    await telegram.await_sent(OWNER, 2, timeout=10)
    assert _texts(telegram)[1].startswith("Still on crunching")


async def test_single_mode_still_answers_with_one_model(telegram, models, start_bot):
    models.script(Reply(text="single here"))
    await start_bot(mode="single")
    telegram.user_sends(OWNER, "hello")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "single here"
    assert {r.model for r in models.requests} == {"back"}


async def test_a_quote_reply_gives_the_front_the_referent(telegram, models, start_bot):
    models.script(Reply(text="first answer"), Reply(text="ok, about that one"), model="front")
    await start_bot(**FAST)
    telegram.user_sends(OWNER, "what's the capital of Peru?")
    first = (await telegram.await_sent(OWNER, 1))[0]
    telegram.user_sends(OWNER, "tell me more", reply_to_message_id=first["message_id"])
    await telegram.await_sent(OWNER, 2)
    burst = _triage(models)[1].last_user_text()
    assert f'<quote id="{first["message_id"]}" from="you">first answer</quote>' in burst


async def test_malformed_front_actions_are_skipped_and_the_reply_still_goes_out(telegram, models, start_bot):
    models.script(
        Reply(
            text="Sure, one sec.",
            tool_calls=[
                ToolCall("spawn", {"spec": ""}),
                ToolCall("explode", {"now": True}),
                ToolCall("redirect", {"task": "ghost", "spec": "x"}),
                ToolCall("spawn", {"label": 5}),
            ],
        ),
        model="front",
    )
    app = await start_bot(**FAST)
    telegram.user_sends(OWNER, "do something")
    sent = await telegram.await_sent(OWNER, 1)
    await _follow_up(telegram, models)
    assert sent[0]["text"] == "Sure, one sec."
    assert app.tasks.count(f"telegram:{OWNER}") == 0
    assert models.requests_for("back") == []


async def test_front_model_failure_is_told_plainly(telegram, models, start_bot):
    models.script(Reply(error_status=529, error_message="Overloaded"), model="front")
    await start_bot(**FAST, model_max_retries=0)
    telegram.user_sends(OWNER, "hello?")
    sent = await telegram.await_sent(OWNER, 1)
    assert "overloaded" in sent[0]["text"].lower()
    assert "529" not in sent[0]["text"]
