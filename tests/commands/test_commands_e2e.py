"""Owner-made commands end to end, through the fake Bot API and the scripted model: created by the model's tool call,
tested in the sandbox, committed, reloaded after the reply, then called as `/shout` (no model call) and as a tool; a
refused one never runs; a rollback; a member is never offered the tools that change them; a broken file in /audit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.commands.support import SHOUT, SHOUT_TESTS, WHISPER_SHOUT, WHISPER_TESTS, needs_bwrap
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access
from tests.support.chat import eventually, until_sent

MEMBER = 2002
CHANGING = {"create_command", "remove_command", "rollback_command", "list_commands"}


def _create(code: str, tests: str, request: str, *, replace: bool = False) -> ToolCall:
    arguments = {"name": "shout", "description": "Shout it", "code": code, "tests": tests, "request": request}
    return ToolCall("create_command", {**arguments, "replace": replace})


def _acting(req: Request) -> Reply:
    """Does what the owner's words name with one tool call, then repeats the tool's result as its answer."""
    if results := req.tool_results():
        return Reply(text="Result: " + results[0]["content"])
    said = req.last_user_text()
    if "add shout" in said:
        return Reply(tool_calls=[_create(SHOUT, SHOUT_TESTS, "add a command called shout")])
    if "whisper" in said:
        return Reply(tool_calls=[_create(WHISPER_SHOUT, WHISPER_TESTS, "make shout whisper", replace=True)])
    if "roll back" in said:
        first = re.search(r"roll back shout to ([0-9a-f]+)", said)
        assert first is not None
        back = {"name": "shout", "to": first[1], "request": first[0]}
        return Reply(tool_calls=[ToolCall("rollback_command", back)])
    if "add a sneaky" in said:
        code = "import subprocess as s\n" + SHOUT.replace("shout", "sneaky")
        tests = SHOUT_TESTS.replace("shout", "sneaky")
        sneaky = {"name": "sneaky", "description": "x", "code": code, "tests": tests}
        return Reply(tool_calls=[ToolCall("create_command", sneaky)])
    if "use it" in said:
        return Reply(tool_calls=[ToolCall("cmd_shout", {"text": "from the model"})])
    return Reply(text="ok")


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


async def _owner_says(telegram, text: str, count: int) -> str:
    telegram.user_sends(OWNER, text)
    return (await telegram.await_sent(OWNER, count, timeout=60))[count - 1]["text"]


@needs_bwrap
async def test_a_command_is_made_in_words_then_called_by_slash_and_by_the_model(telegram, models, start_bot, make_settings):
    write_access(make_settings(), policy="open")
    models.responder(_acting)
    app = await start_bot()
    assert CHANGING <= set((await _owner_turn(telegram, models, "hi")).tool_names), "the owner is offered them"
    made = await _owner_says(telegram, "please add shout", 2)
    assert made.startswith("Result: /shout passed its tests in the sandbox (1 passed"), made
    folder = app.settings.data_dir / "commands"
    assert _git(folder, "log", "--format=%an %ae %s") == "bicameral bicameral@localhost add a command called shout\n"
    await eventually(lambda: app.commands.current.get("shout"), "shout loaded after the reply went out")
    asked = len(models.requests)
    assert await _owner_says(telegram, "/shout hi there", 3) == "HI THERE!"
    assert await _owner_says(telegram, "/shout", 4) == (
        "I can't run that: missing text.\nUsage: /shout <text>\ntext (str): what to shout"
    )
    assert len(models.requests) == asked, "a command answers without a model call"
    # A member may call it, by slash and through the model, but is never offered the tools that change commands.
    telegram.user_sends(MEMBER, "/shout quiet")
    assert (await telegram.await_sent(MEMBER, 1))[0]["text"] == "QUIET!"
    telegram.user_sends(MEMBER, "use it")
    answer = (await telegram.await_sent(MEMBER, 2, timeout=30))[1]["text"]
    assert answer == "Result: FROM THE MODEL!"
    offered = next(r for r in models.requests if "use it" in r.last_user_text())
    assert "cmd_shout" in offered.tool_names and not CHANGING & set(offered.tool_names)
    schema = next(t for t in offered.tools if (t.get("function") or t).get("name") == "cmd_shout")
    assert "what to shout" in str(schema)
    telegram.user_sends(MEMBER, "/commands history shout")
    assert "Use /commands to list them" in (await telegram.await_sent(MEMBER, 3))[2]["text"], "history is the owner's"
    assert await _owner_says(telegram, "/commands", 5) == "/shout — Shout it"
    telegram.user_sends(MEMBER, "/help")
    assert "Commands the owner added:\n/shout <text> — Shout it" in (await telegram.await_sent(MEMBER, 4))[3]["text"]
    assert await _owner_says(telegram, "/commands history shout", 6) == _git(
        folder, "log", "--format=%h %ad %s", "--date=format:%Y-%m-%d %H:%M"
    ).strip()


async def _owner_turn(telegram, models, text: str) -> Request:
    before = len(models.requests)
    sent = len(telegram.sent_messages(OWNER))
    telegram.user_sends(OWNER, text)
    await telegram.await_sent(OWNER, sent + 1, timeout=30)
    return models.requests[before]


@needs_bwrap
async def test_a_refused_command_never_runs_and_the_owner_reads_why(telegram, models, start_bot):
    models.responder(_acting)
    app = await start_bot()
    refused = await _owner_says(telegram, "add a sneaky one", 1)
    assert "/sneaky was not saved" in refused and "sneaky.py line 1: importing subprocess is not allowed" in refused
    assert not (app.settings.data_dir / "commands" / "sneaky.py").exists()
    asked = len(models.requests)
    await _owner_says(telegram, "/sneaky hi", 2)
    assert len(models.requests) == asked + 1, "no command: the words went to the model as a message"


@needs_bwrap
async def test_a_command_is_rolled_back_to_its_first_version(telegram, models, start_bot):
    models.responder(_acting)
    app = await start_bot()
    folder = app.settings.data_dir / "commands"
    await _owner_says(telegram, "add shout", 1)
    first = _git(folder, "rev-parse", "--short", "HEAD").strip()
    changed = await _owner_says(telegram, "make it whisper", 2)
    assert "passed its tests" in changed, changed
    await eventually(app.commands.reloaded.is_set, "the whisper loaded after the reply")
    assert await _owner_says(telegram, "/shout HEY", 3) == "hey..."
    back = await _owner_says(telegram, f"roll back shout to {first}", 4)
    assert f"is back to its version of {first}" in back, back
    await eventually(app.commands.reloaded.is_set, "the first version loaded after the reply")
    assert await _owner_says(telegram, "/shout hey", 5) == "HEY!"


async def test_a_broken_file_edited_by_hand_is_skipped_and_shown_in_audit(telegram, models, start_bot, make_settings):
    folder = make_settings().data_dir / "commands"
    folder.mkdir(parents=True)
    (folder / "token.py").write_text("import os\n" + SHOUT.replace("shout", "token"))
    (folder / "shout.py").write_text(SHOUT)
    models.responder(_acting)
    await start_bot()
    audit = await _owner_says(telegram, "/audit", 1)
    assert "command token.py: line 1: importing os is not allowed" in audit
    assert await _owner_says(telegram, "/shout works", 2) == "WORKS!"


@needs_bwrap
async def test_in_two_chambers_the_back_makes_it_and_it_loads_with_no_turn_after(telegram, models, start_bot):
    """The back task calls create_command; no lane turn ends after it, so the reload comes from the grace timer."""
    spawn = ToolCall("spawn", {"spec": "Add the shout command the owner asked for.", "label": "shout"})
    models.script(Reply(tool_calls=[spawn, ToolCall("reply", {"text": "on it"})]), model="front")
    models.responder(lambda req: Reply(text="Done: " + req.last_user_text()[-80:]), model="front")
    models.script(Reply(tool_calls=[_create(SHOUT, SHOUT_TESTS, "add shout")]), Reply(text="Added /shout."), model="back")
    app = await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=150, task_retry_delay_seconds=0)
    telegram.user_sends(OWNER, "add a command called shout")
    await eventually(lambda: app.commands.current.get("shout"), "shout loaded", timeout=60)
    assert "create_command" in models.requests_for("back")[0].tool_names
    assert "passed its tests" in models.requests_for("back")[1].tool_results()[0]["content"]
    telegram.user_sends(OWNER, "/shout two chambers")
    await until_sent(telegram, OWNER, "TWO CHAMBERS!")
