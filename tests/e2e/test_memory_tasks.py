"""Memory in the two chambers: a long back task compacts (facts first), the front remembers, forget scrubs."""

from __future__ import annotations

import json

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access
from tests.support.chat import eventually, until_sent

FAST = dict(mode="bicameral", delivery_pause_scale=0, debounce_ms=100, task_retry_delay_seconds=0)
SUMMARY = "<summary of the earlier conversation>"
ZONES = ["UTC", "Europe/Berlin", "Asia/Tokyo", "America/New_York"]
PADDING = "Checking the clock once more to be sure it is right. " * 6


def _seen(req: Request) -> str:
    return json.dumps(req.raw, ensure_ascii=False)


def _is_voice_pass(req: Request) -> bool:
    return "Rephrase the text" in req.system or "Rewrite its result" in req.system


def _voice_echo(req: Request) -> Reply:
    return Reply(text="Here you go: " + req.last_user_text().split("<result>")[-1].split("</result>")[0].strip())


def _is_flush(req: Request) -> bool:
    return "long-term memory" in req.system


def _is_summary(req: Request) -> bool:
    return "Summarise the earlier part" in req.system


def _work(requests: list[Request]) -> list[Request]:
    return [r for r in requests if not _is_flush(r) and not _is_summary(r)]


def _assert_tool_pairs_intact(req: Request) -> None:
    """Every tool result answers a call of the assistant message right before it, and every call is answered."""
    waiting: set[str] = set()
    for message in req.messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in waiting, f"an orphan tool result: {message['tool_call_id']}"
            waiting.discard(message["tool_call_id"])
            continue
        assert not waiting, f"tool calls without results: {waiting}"
        if message["role"] == "assistant":
            waiting = {c["id"] for c in message.get("tool_calls") or []}
    assert not waiting


class LongTask:
    """The back model: checks the clock step after step until its transcript was compacted, then answers."""

    def __init__(self, *, hang_once_after_compaction: bool = False) -> None:
        self.steps = 0
        self.told = False
        self.hang = hang_once_after_compaction

    def __call__(self, req: Request) -> Reply:
        if _is_flush(req):
            locker = {"text": "Ada's locker is number 512", "importance": 0.7, "key": "locker", "about": "me"}
            return Reply(text=json.dumps({"facts": [locker] if "512" in req.last_user_text() else []}))
        if _is_summary(req):
            return Reply(text="Earlier: the clock was checked in several zones; Ada's note about her locker came in.")
        seen = _seen(req)
        self.told = self.told or "locker is number 512" in seen
        if SUMMARY in seen and self.told and self.steps >= 8:
            if self.hang:
                self.hang = False
                return Reply(text="never delivered", latency=30)
            return Reply(text=f"Checked the clock {self.steps} times; all agree.")
        self.steps += 1
        zone = ZONES[self.steps % len(ZONES)]
        return Reply(text=PADDING, tool_calls=[ToolCall("current_time", {"timezone": zone})], latency=0.05)


def _script_front(models) -> None:
    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Check the clock in many zones.", "label": "clocks"}),
                          ToolCall("reply", {"text": "on it"})]),
        Reply(tool_calls=[ToolCall("append", {"task": "clocks", "context": "Ada says: my locker is number 512"}),
                          ToolCall("reply", {"text": "noted"})]),
        model="front",
    )
    models.responder(_voice_echo, model="front")


async def test_a_long_back_task_compacts_keeps_tool_pairs_and_flushes_what_it_was_told(telegram, models, start_bot):
    _script_front(models)
    back = LongTask()
    models.responder(back, model="back")
    app = await start_bot(**FAST, task_compact_tokens=900)
    telegram.user_sends(OWNER, "check the clock in many zones for me")
    await until_sent(telegram, OWNER, "on it")
    telegram.user_sends(OWNER, "oh, and my locker is number 512")
    await _until_text(telegram, "Checked the clock")

    requests = models.requests_for("back")
    told = [i for i, r in enumerate(requests) if "locker is number 512" in r.last_user_text()]
    flush = next(i for i in told if _is_flush(requests[i]))
    summary = next(i for i in told if _is_summary(requests[i]))
    assert flush < summary  # the note's facts are kept first, then it is summarised away
    work = _work(requests)
    for req in work:
        _assert_tool_pairs_intact(req)
        assert "Check the clock in many zones." in _seen(req)  # the brief is kept verbatim
    last = work[-1]
    assert SUMMARY in _seen(last) and "Ada's note about her locker" in _seen(last)
    assert '"Asia/Tokyo"' not in json.dumps(last.messages[:3])  # early steps were summarised away ...
    assert "Ada's locker is number 512" in {f.text for f in app.stores.memory.all([f"user:telegram:{OWNER}"])}
    task = app.tasks.for_chat(f"telegram:{OWNER}")[0]
    assert task.state.value == "completed"
    checkpoint = json.dumps(app.tasks.latest_checkpoint(task.id))
    assert SUMMARY in checkpoint and "locker is number 512" not in checkpoint.split(SUMMARY)[0]


async def test_a_restart_after_compaction_resumes_from_the_compacted_checkpoint(telegram, models, start_bot):
    _script_front(models)
    back = LongTask(hang_once_after_compaction=True)
    models.responder(back, model="back")
    app = await start_bot(**FAST, task_compact_tokens=900)
    telegram.user_sends(OWNER, "check the clock in many zones for me")
    await until_sent(telegram, OWNER, "on it")
    telegram.user_sends(OWNER, "oh, and my locker is number 512")
    await eventually(lambda: not back.hang, "the back task to hang after its compaction", timeout=30)
    hanging = models.requests_for("back")[-1]
    task = app.tasks.for_chat(f"telegram:{OWNER}")[0]
    saved = app.tasks.latest_checkpoint(task.id)
    await app.stop()
    assert SUMMARY in json.dumps(saved)

    before = len(models.requests_for("back"))
    app = await start_bot(**FAST, task_compact_tokens=900)
    await _until_text(telegram, "Checked the clock")
    resumed = _work(models.requests_for("back")[before:])[0]
    _assert_tool_pairs_intact(resumed)
    # The resumed run starts from what was checkpointed after compaction: the summary, not the early steps.
    assert resumed.messages[1:] == hanging.messages[1:]
    assert SUMMARY in _seen(resumed) and "Check the clock in many zones." in _seen(resumed)
    assert app.tasks.get(task.id).state.value == "completed"


async def test_the_front_remembers_without_a_task_and_only_that_user_sees_it(telegram, models, start_bot, make_settings):
    write_access(make_settings(), policy="open")
    other = 4242

    def front(req: Request) -> Reply:
        if _is_voice_pass(req):
            return _voice_echo(req)
        if "remember that I'm vegetarian" in req.last_user_text().split("</situation>")[-1]:
            return Reply(tool_calls=[ToolCall("remember", {"text": "Ada is vegetarian", "importance": 0.9, "key": "diet"}),
                                     ToolCall("reply", {"text": "Noted!"})])
        return Reply(tool_calls=[ToolCall("reply", {"text": "sure"})])

    models.responder(front, model="front")
    app = await start_bot(**FAST)
    telegram.user_sends(OWNER, "remember that I'm vegetarian")
    await until_sent(telegram, OWNER, "Noted!")
    assert [f.text for f in app.stores.memory.all([f"user:telegram:{OWNER}"])] == ["Ada is vegetarian"]
    assert models.requests_for("back") == []  # stored at once, no task

    telegram.user_sends(OWNER, "what should I cook tonight?")
    await until_sent(telegram, OWNER, "sure")
    telegram.user_sends(other, "what should I cook tonight?")
    await until_sent(telegram, other, "sure")
    mine, theirs = [r for r in models.requests_for("front") if not _is_voice_pass(r)][-2:]
    assert "cook tonight" in mine.last_user_text() and "cook tonight" in theirs.last_user_text()
    assert "Ada is vegetarian" in mine.last_user_text() and "Ada is vegetarian" not in mine.system
    assert "Ada is vegetarian" not in _seen(theirs)


async def _until_text(telegram, text: str, chat: int = OWNER) -> None:
    """Until a message sent to `chat` contains `text` (`until_sent` waits for the whole text)."""
    await eventually(lambda: any(text in m["text"] for m in telegram.sent_messages(chat)), f"a text with {text!r}", timeout=30)


async def test_the_forget_tool_scrubs_the_single_mode_session_like_the_command(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("remember", {"text": "Ada's locker code is 4471", "importance": 0.7})]),
        Reply(text="Got it."),
        Reply(tool_calls=[ToolCall("forget", {"what": "locker code"})]),
        Reply(text="Gone from my memory."),
        Reply(text="I don't know it."),
    )
    await start_bot()
    telegram.user_sends(OWNER, "please keep my locker code in mind, it is the one on the card")
    await until_sent(telegram, OWNER, "Got it.")
    telegram.user_sends(OWNER, "actually, drop that")
    await until_sent(telegram, OWNER, "Gone from my memory.")
    assert "4471" in _seen(models.requests[2])  # before the forget the fact was there ...
    assert "forgot 1" in models.requests[3].tool_results()[0]["content"]
    telegram.user_sends(OWNER, "what is my locker code?")
    await until_sent(telegram, OWNER, "I don't know it.")
    assert all("4471" not in _seen(r) for r in models.requests[3:])  # ... and from the forget on, never again


async def test_the_forget_tool_in_a_back_task_scrubs_that_task_and_later_calls(telegram, models, start_bot):
    def front(req: Request) -> Reply:
        if _is_voice_pass(req):
            return _voice_echo(req)
        said = req.last_user_text().split("</situation>")[-1]
        if "forget my locker code" in said:
            return Reply(tool_calls=[ToolCall("spawn", {"spec": "Forget the user's locker code.", "label": "forget"}),
                                     ToolCall("reply", {"text": "on it"})])
        if "look up" in said:
            return Reply(tool_calls=[ToolCall("spawn", {"spec": "Find the user's locker code.", "label": "lookup"}),
                                     ToolCall("reply", {"text": "looking"})])
        return Reply(tool_calls=[ToolCall("reply", {"text": "ok"})])

    models.responder(front, model="front")
    models.script(
        Reply(tool_calls=[ToolCall("forget", {"what": "locker code"})]),
        Reply(text="Done, it is forgotten."),
        Reply(text="I have no locker code on file."),
        model="back",
    )
    app = await start_bot(**FAST)
    app.stores.memory.remember(f"user:telegram:{OWNER}", "Ada's locker code is 4471", importance=0.9)
    telegram.user_sends(OWNER, "please forget my locker code")
    await _until_text(telegram, "Done, it is forgotten.")
    first, after_forget = models.requests_for("back")[:2]
    assert "4471" in _seen(first)  # injected into the task's brief ...
    assert "forgot 1" in after_forget.tool_results()[0]["content"]
    assert "4471" not in _seen(after_forget)  # ... and blanked out of the task once forgotten
    task = app.tasks.for_chat(f"telegram:{OWNER}")[0]
    assert "4471" not in json.dumps(app.tasks.latest_checkpoint(task.id))

    telegram.user_sends(OWNER, "look up my locker code")
    await _until_text(telegram, "I have no locker code on file.")
    assert "4471" not in _seen(models.requests_for("back")[-1])
    later_fronts = [r for r in models.requests_for("front") if "look up" in r.last_user_text()]
    assert later_fronts and all("4471" not in _seen(r) for r in later_fronts)


async def test_the_front_forgets_without_a_task_and_later_front_calls_never_carry_it(telegram, models, start_bot):
    def front(req: Request) -> Reply:
        if _is_voice_pass(req):
            return _voice_echo(req)
        said = req.last_user_text().split("</situation>")[-1]
        if "forget my locker code" in said:
            return Reply(tool_calls=[ToolCall("forget", {"what": "locker code"}), ToolCall("reply", {"text": "Forgotten."})])
        return Reply(tool_calls=[ToolCall("reply", {"text": "ok"})])

    models.responder(front, model="front")
    app = await start_bot(**FAST)
    app.stores.memory.remember(f"user:telegram:{OWNER}", "Ada's locker code is 4471", importance=0.9)
    telegram.user_sends(OWNER, "what is my locker code?")
    await until_sent(telegram, OWNER, "ok")
    assert "4471" in _seen(models.requests_for("front")[-1])  # injected before the forget ...
    telegram.user_sends(OWNER, "please forget my locker code")
    await until_sent(telegram, OWNER, "Forgotten.")
    assert app.stores.memory.all([f"user:telegram:{OWNER}"]) == []
    assert models.requests_for("back") == []  # done at once, no task

    telegram.user_sends(OWNER, "so, what is my locker code?")
    await eventually(lambda: len(telegram.sent_messages(OWNER)) >= 3, "the answer to the question", timeout=30)
    later = [r for r in models.requests_for("front") if "so, what is my locker code" in r.last_user_text()]
    assert later and all("4471" not in _seen(r) for r in later)  # ... and never again after it
