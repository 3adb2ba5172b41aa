"""What a Telegram user sees when the real Claude Code CLI is the executor, through the fakes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from bicameral.claude_code.chamber import SESSION_KEY_PREFIX
from bicameral.claude_code.spec import FORBIDDEN_FLAGS
from tests.claude_code.conftest import API_KEY, SEND, main_requests, routed, sends
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually, quiet_for

pytestmark = pytest.mark.slow
CHAT = f"telegram:{OWNER}"


def session_of(app) -> str | None:
    return app.stores.kv.get(SESSION_KEY_PREFIX + CHAT)


WAIT = 20.0  # for a state the real CLI reaches (a stored session, a respawn): generous on a busy machine


def assert_locked_down(app) -> None:
    worker = app.handler.worker_for(CHAT)
    for spec in worker.spawns:
        assert not set(spec.argv) & set(FORBIDDEN_FLAGS)
        assert "bypassPermissions" not in spec.argv


async def test_dm_is_answered_through_the_mcp_tool(telegram, models, start_cc_bot):
    models.responder(sends(lambda req: "Hello Ada, " + ("got it" if "hi there" in req.last_user_text() else "?")))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "hi there")
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    assert sent[0]["text"] == "Hello Ada, got it"
    rows = await eventually(
        lambda: [r for r in app.stores.tool_calls.recent() if r["name"] == "send_message"], "the audit row", timeout=WAIT
    )
    assert len(rows) == 1 and rows[0]["chat"] == CHAT and rows[0]["error"] is None
    assert json.loads(rows[0]["args"]) == {"text": "Hello Ada, got it"}
    first = main_requests(models)[0]
    assert "mcp__bicameral__send_message" in first.tool_names
    assert not {"Bash", "Read", "Write", "Edit", "Agent"} & set(first.tool_names)
    await eventually(lambda: session_of(app), what="the session id to be stored", timeout=WAIT)
    assert_locked_down(app)
    # The API key reaches the CLI's environment only: not the capture files, not the database.
    data = app.settings.data_dir
    stored = [p for p in data.rglob("*") if p.is_file() and "cc_logs" in p.parts] + [app.settings.db_path]
    assert any(p.name.endswith(".stream.jsonl") for p in stored)
    for path in stored:
        assert API_KEY.encode() not in path.read_bytes(), path
    spawn_note = next(p for p in stored if p.name.endswith(".stderr.log")).read_text()
    assert '"ANTHROPIC_API_KEY": "[REDACTED:secret]"' in spawn_note


def said(req: Request) -> str:
    """The text of the last `<msg>` envelope in the request's last user turn."""
    text = req.last_user_text()
    start = text.rfind("<msg ")
    if start < 0:
        return ""
    body = text[text.index(">", start) + 1 :]
    return body.split("</msg>", 1)[0].strip()


async def test_kill_9_respawns_with_resume_and_the_next_message_is_answered(telegram, models, start_cc_bot):
    models.responder(sends(lambda req: f"you said: {said(req)}"))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "remember the word ostrich")
    await telegram.await_sent(OWNER, 1, timeout=30)
    session = await eventually(lambda: session_of(app), what="the session id", timeout=WAIT)
    await eventually(lambda: not app.conversation.busy_chats(), what="the turn to end", timeout=WAIT)
    worker = app.handler.worker_for(CHAT)
    old_pid = worker.pid
    os.kill(old_pid, signal.SIGKILL)
    await eventually(lambda: worker.pid not in (None, old_pid), what="the respawned CLI", timeout=WAIT)
    assert worker.spawns[-1].resume and "--resume" in worker.spawns[-1].argv
    assert worker.spawns[-1].argv[worker.spawns[-1].argv.index("--resume") + 1] == session
    telegram.user_sends(OWNER, "which word?")
    sent = await telegram.await_sent(OWNER, 2, timeout=30)
    assert sent[1]["text"] == "you said: which word?"
    last = main_requests(models)[-1]
    assert "remember the word ostrich" in json.dumps(last.messages)  # the same conversation, resumed
    assert session_of(app) == session
    assert_locked_down(app)


async def test_text_without_a_send_is_nudged_then_shown(telegram, models, start_cc_bot):
    models.responder(routed(lambda req: Reply(text="The capital of France is Paris.")))
    await start_cc_bot(dropped_text_max_retries=2)
    telegram.user_sends(OWNER, "capital of France?")
    sent = await telegram.await_sent(OWNER, 1, timeout=40)
    assert sent[0]["text"] == "The capital of France is Paris."
    mains = main_requests(models)
    assert len(mains) == 3  # the turn, then one request per nudge
    assert all("did not send it" in r.last_user_text() for r in mains[1:])
    assert "did not send it" not in mains[0].last_user_text()
    await quiet_for(0.5, "a text the nudges had made the model send a second time would have arrived by now")
    assert len(telegram.sent_messages(OWNER)) == 1


async def test_a_rejected_turn_starts_a_fresh_session_and_says_so(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        if req.tool_results():
            return Reply(text="sent")
        if said(req) == "now break":
            return Reply(error_status=400, error_message="prompt is too long: 250000 tokens > 200000 maximum")
        return Reply(tool_calls=[ToolCall(SEND, {"text": f"ok: {said(req)}"})])

    models.responder(routed(decide))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "my name is Ada")
    await telegram.await_sent(OWNER, 1, timeout=30)
    first_session = await eventually(lambda: session_of(app), what="the first session id", timeout=WAIT)
    telegram.user_sends(OWNER, "now break")
    sent = await telegram.await_sent(OWNER, 2, timeout=30)
    assert "too long" in sent[1]["text"] and "fresh conversation" in sent[1]["text"]
    worker = app.handler.worker_for(CHAT)
    await eventually(lambda: worker.spawns[-1].session_id != first_session, what="a fresh spawn", timeout=WAIT)
    assert session_of(app) != first_session
    fresh = worker.spawns[-1]
    assert "--resume" not in fresh.argv and "--session-id" in fresh.argv
    telegram.user_sends(OWNER, "who am I?")
    sent = await telegram.await_sent(OWNER, 3, timeout=30)
    assert sent[2]["text"] == "ok: who am I?"
    assert "my name is Ada" not in json.dumps(main_requests(models)[-1].messages)
    assert await eventually(lambda: session_of(app) == fresh.session_id, what="the new session id to be stored", timeout=WAIT)


async def test_a_stalled_cli_is_killed_and_the_turn_still_answered(telegram, models, start_cc_bot):
    stalled: list[Request] = []

    def decide(req: Request) -> Reply:
        if req.tool_results():
            return Reply(text="sent")
        if "slow question" in req.last_user_text() and not stalled:
            stalled.append(req)
            return Reply(tool_calls=[ToolCall(SEND, {"text": "too late"})], latency=60)
        return Reply(tool_calls=[ToolCall(SEND, {"text": f"answer to {said(req)}"})])

    models.responder(routed(decide))
    # Long enough that a CLI merely slow to start on a loaded machine is not taken for a stalled one.
    app = await start_cc_bot(liveness_timeout_seconds=10, liveness_poll_seconds=0.25)
    telegram.user_sends(OWNER, "warm up")
    await telegram.await_sent(OWNER, 1, timeout=30)
    session = await eventually(lambda: session_of(app), what="the session id", timeout=WAIT)
    worker = app.handler.worker_for(CHAT)
    telegram.user_sends(OWNER, "slow question")
    # Silence, a kill, a respawn with --resume and the answer: about 30 s on a quiet machine, more on a busy one.
    sent = await telegram.await_sent(OWNER, 2, timeout=100)
    assert sent[1]["text"] == "answer to slow question"
    resumed = worker.spawns[-1]
    assert resumed.resume and resumed.session_id == session
    assert len(worker.spawns) == 2
    await quiet_for(0.3, "a second answer to the slow question would have arrived by now")
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["answer to warm up", "answer to slow question"]


async def test_three_tool_errors_trip_the_breaker_and_the_user_is_told(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if len([r for r in main_requests(models) if r.tool_results()]) > 6:
            return Reply(text="giving up")
        if results and not results[0]["is_error"]:
            return Reply(text="sent")
        return Reply(tool_calls=[ToolCall("mcp__bicameral__current_time", {"timezone": "Mars/Olympus"})])

    models.responder(routed(decide))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "what time is it on Mars?")
    sent = await telegram.await_sent(OWNER, 1, timeout=40)
    assert "I stopped working on this because 3 tool errors in a row" in sent[0]["text"]
    rows = [r for r in app.stores.tool_calls.recent() if r["name"] == "current_time"]
    assert len(rows) == 3 and all("unknown time zone" in r["error"] for r in rows)
    errored = [r for r in main_requests(models) if r.tool_results()]
    assert all(r.tool_results()[0]["is_error"] for r in errored)


async def test_a_message_sent_mid_turn_is_injected_into_the_running_turn(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        if req.tool_results():
            if "send_message" in json.dumps(req.messages[-2:]) and "sent message_id" in req.last_user_text():
                return Reply(text="sent")
            text = "both noted" if "the date too" in req.last_user_text() else "only one"
            return Reply(tool_calls=[ToolCall(SEND, {"text": text})])
        return Reply(tool_calls=[ToolCall("mcp__bicameral__current_time", {})], latency=1.5)

    models.responder(routed(decide))
    await start_cc_bot(debounce_ms=50)
    telegram.user_sends(OWNER, "what time is it")
    await models.await_requests(1, timeout=30)
    await asyncio.sleep(0.3)  # the user's pace: the second message comes while the model answers the first (1.5 s)
    telegram.user_sends(OWNER, "and the date too")
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    assert sent[0]["text"] == "both noted"
    await quiet_for(1.0, "a second turn for the injected message would have sent its text by now")
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["both noted"]


async def test_stop_interrupts_the_turn_and_the_next_message_works(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        if req.tool_results():
            return Reply(text="sent")
        if "take your time" in req.last_user_text() and "hello again" not in req.last_user_text():
            return Reply(tool_calls=[ToolCall(SEND, {"text": "too late"})], latency=4)
        return Reply(tool_calls=[ToolCall(SEND, {"text": f"hi: {said(req)}"})])

    models.responder(routed(decide))
    app = await start_cc_bot(debounce_ms=50)
    telegram.user_sends(OWNER, "take your time")
    await models.await_requests(1, timeout=30)
    telegram.user_sends(OWNER, "/stop")
    sent = await telegram.await_sent(OWNER, 1, timeout=10)
    assert sent[0]["text"] == "Stopped."
    telegram.user_sends(OWNER, "hello again")
    sent = await telegram.await_sent(OWNER, 2, timeout=30)
    assert sent[1]["text"] == "hi: hello again"
    await quiet_for(4.5, "past the first reply's latency: a text of the stopped turn would have arrived by now")
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["Stopped.", "hi: hello again"]
    assert app.handler.worker_for(CHAT).alive


async def test_reset_starts_a_fresh_cli_session(telegram, models, start_cc_bot):
    models.responder(sends(lambda req: f"noted: {said(req)}"))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "my name is Ada")
    await telegram.await_sent(OWNER, 1, timeout=30)
    first = await eventually(lambda: session_of(app), what="the first session id", timeout=WAIT)
    telegram.user_sends(OWNER, "/reset")
    await telegram.await_sent(OWNER, 2, timeout=10)
    assert session_of(app) is None
    telegram.user_sends(OWNER, "who am I?")
    sent = await telegram.await_sent(OWNER, 3, timeout=30)
    assert sent[2]["text"] == "noted: who am I?"
    worker = app.handler.worker_for(CHAT)
    assert not worker.spawns[-1].resume and worker.spawns[-1].session_id != first
    assert "my name is Ada" not in json.dumps(main_requests(models)[-1].messages)
    assert await eventually(lambda: session_of(app) not in (None, first), what="the new session id", timeout=WAIT)


async def test_kill_9_mid_turn_resumes_the_session_and_still_answers(telegram, models, start_cc_bot):
    stalled: list[Request] = []

    def decide(req: Request) -> Reply:
        results = req.tool_results()
        if results and "sent message_id" in results[0]["content"]:
            return Reply(text="sent")
        if results and not stalled:
            stalled.append(req)  # the CLI is busy with this turn: the process dies right here
            return Reply(tool_calls=[ToolCall(SEND, {"text": "never delivered"})], latency=15)
        if results:
            return Reply(tool_calls=[ToolCall(SEND, {"text": f"answer to {said(req)}"})])
        if "restarted" in req.last_user_text():
            return Reply(tool_calls=[ToolCall(SEND, {"text": f"answer to {said(req)}"})])
        return Reply(tool_calls=[ToolCall("mcp__bicameral__current_time", {})])

    models.responder(routed(decide))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "the very first question")
    await eventually(lambda: stalled, what="the turn to be mid-way", timeout=WAIT)
    session = session_of(app)
    assert session is not None  # stored once the CLI took the message in
    # The CLI writes its transcript a moment after each step; kill once the tool step is on disk.
    worker = app.handler.worker_for(CHAT)
    config_dir = Path(worker.spawns[-1].env["CLAUDE_CONFIG_DIR"])
    await eventually(
        lambda: _transcript_has(config_dir, session, "tool_result"), what="the CLI to save the tool step", timeout=WAIT
    )
    os.kill(worker.pid, signal.SIGKILL)
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    assert sent[0]["text"] == "answer to the very first question"
    resumed = worker.spawns[-1]
    assert resumed.resume and resumed.session_id == session == session_of(app)
    conversation = json.dumps(main_requests(models)[-1].messages)
    assert "the very first question" in conversation and "current_time" in conversation  # resumed, not restarted
    await quiet_for(0.3, "an answer from the killed CLI or a second one from the resumed turn would have arrived by now")
    assert len(telegram.sent_messages(OWNER)) == 1


def _transcript_has(config_dir: Path, session: str, needle: str) -> bool:
    """Whether the CLI's own transcript of `session` (under its config dir) contains `needle`."""
    return any(needle in path.read_text(errors="replace") for path in config_dir.rglob(f"{session}.jsonl"))


@pytest.mark.parametrize("confirmed", [False, True])
async def test_a_stored_session_the_cli_no_longer_has(telegram, models, start_cc_bot, make_settings, confirmed):
    """Never confirmed (it died before its first turn was saved): silently fresh. Confirmed: fresh, and said."""
    from bicameral.store import Stores

    lost = "0b6c1e2a-8d1e-4f57-9a51-6a3f7d0e9c11"
    settings = make_settings()
    stores = Stores.open(settings.db_path)
    stores.kv.set(SESSION_KEY_PREFIX + CHAT, lost)
    if confirmed:
        stores.kv.set(SESSION_KEY_PREFIX + CHAT + ".confirmed", lost)
    stores.close()
    models.responder(sends(lambda req: f"answer to {said(req)}"))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "hello after a move")
    expected = ["answer to hello after a move"]
    if confirmed:
        expected.insert(0, "I couldn't reopen our earlier conversation, so I started a fresh one.")
    await telegram.await_sent(OWNER, len(expected), timeout=40)
    await quiet_for(0.5, "a notice of the fresh start sent wrongly, or twice, would have arrived by now")
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == expected
    assert session_of(app) not in (None, lost)


async def test_two_chats_at_once_each_get_their_own_answer(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        if req.tool_results():
            return Reply(text="sent")
        # Long enough that two CLIs starting seconds apart on a busy machine still overlap, unless serialised.
        return Reply(tool_calls=[ToolCall(SEND, {"text": f"for you: {said(req)}"})], latency=4.0)

    models.responder(routed(decide))
    app = await start_cc_bot(debounce_ms=0)
    app.gate.access.save(app.gate.access.config.model_copy(update={"policy": "open"}))
    other = 5005
    telegram.user_sends(OWNER, "I am the owner")
    telegram.user_sends(other, "I am someone else", user_id=other, first_name="Bob")
    mine = await telegram.await_sent(OWNER, 1, timeout=40)
    theirs = await telegram.await_sent(other, 1, timeout=40)
    assert [m["text"] for m in mine] == ["for you: I am the owner"]
    assert [m["text"] for m in theirs] == ["for you: I am someone else"]
    # Each chat's first request (not a later one carrying its tool result), once the fake has noted both done.
    def first_per_chat() -> list:
        firsts = [r for r in main_requests(models) if not r.tool_results()][:2]
        return firsts if len(firsts) == 2 and all(r.completed_at is not None for r in firsts) else []

    first_two = await eventually(first_per_chat, what="both chats' first requests to be finished", timeout=WAIT)
    assert max(r.received_at for r in first_two) < min(r.completed_at for r in first_two)  # they overlapped
    def audited() -> list[dict]:
        rows = [r for r in app.stores.tool_calls.recent() if r["name"] == "send_message"]
        return rows if len(rows) >= 2 else []

    sends = await eventually(audited, what="both audit rows", timeout=WAIT)
    assert {(r["chat"], json.loads(r["args"])["text"]) for r in sends} == {
        (CHAT, "for you: I am the owner"),
        (f"telegram:{other}", "for you: I am someone else"),
    }
    for req in main_requests(models):  # separate sessions: no chat's conversation holds the other's words
        seen = json.dumps(req.messages)
        assert not ("I am the owner" in seen and "I am someone else" in seen)


async def test_rejected_credentials_are_reported_at_once_and_the_session_kept(telegram, models, start_cc_bot):
    models.responder(routed(lambda req: Reply(error_status=401, error_message="invalid x-api-key")))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "hello?")
    sent = await telegram.await_sent(OWNER, 1, timeout=20)  # not after the CLI's ten retries
    assert "credentials were rejected" in sent[0]["text"]
    assert len(main_requests(models)) <= 3
    worker = app.handler.worker_for(CHAT)
    assert len(worker.spawns) == 1 and worker.alive  # nothing to restart: the session is fine


async def test_a_long_turn_shows_a_progress_note_until_the_answer_goes_out(telegram, models, start_cc_bot):
    def decide(req: Request) -> Reply:
        if not req.tool_results():
            return Reply(tool_calls=[ToolCall("mcp__bicameral__current_time", {})])
        if "send_message" in json.dumps(req.messages[-2:]):
            return Reply(text="sent")
        # Thinking over the tool's result takes longer than the note waits.
        return Reply(tool_calls=[ToolCall(SEND, {"text": "It is noon."})], latency=3)

    models.responder(routed(decide))
    await start_cc_bot(progress_note_after_seconds=0.5)
    telegram.user_sends(OWNER, "what time is it")
    [note, answer] = await telegram.await_sent(OWNER, 2, timeout=60)
    assert note["text"].startswith("Still working on it") and "current_time" in note["text"]
    assert answer["text"] == "It is noon."
    [deleted] = telegram.wait_for_call("deleteMessage", timeout=30)
    assert str(deleted.params["message_id"]) == str(note["message_id"])
