"""A model steered into writing hostile tool arguments (NUL, lone surrogates, control codes) cannot break memory."""

from __future__ import annotations

import json

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall

BOT = "@bicameral_test_bot"
GROUP = -100900
MEMBER = 2002
GROUP_CHAT = {"chat_type": "supergroup", "chat_title": "Team"}


def _open_access(make_settings) -> None:
    path = make_settings().resolved_access_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"policy": "open"}))


async def test_a_nul_or_lone_surrogate_a_member_gets_remembered_never_hides_the_groups_facts(
    telegram, models, start_bot, make_settings
):
    _open_access(make_settings)
    models.script(
        Reply(tool_calls=[ToolCall("remember", {"text": "The team offsite is in Porto", "where": "group"})]),
        Reply(text="Noted for the group."),
        # A member's message steers the model into facts no file should hold.
        Reply(tool_calls=[ToolCall("remember", {"text": "Lunch is at noon\x00 sharp", "key": "lun\x00ch"})]),
        Reply(text="Noted."),
        Reply(tool_calls=[ToolCall("remember", {"text": "The caf\ud800 order is a flat white"})]),
        Reply(text="Noted too."),
        Reply(tool_calls=[
            ToolCall("recall", {"query": "offsite"}),
            ToolCall("remember", {"text": "The team retro is on Fridays"}),
        ]),
        Reply(text="Porto, and the retro is noted."),
    )
    await start_bot(debounce_ms=0)
    telegram.user_sends(GROUP, f"{BOT} remember the offsite is in Porto", user_id=OWNER, **GROUP_CHAT)
    await telegram.await_sent(GROUP, 1)
    telegram.user_sends(GROUP, f"{BOT} remember lunch", user_id=MEMBER, first_name="Mallory", **GROUP_CHAT)
    await telegram.await_sent(GROUP, 2)
    telegram.user_sends(GROUP, f"{BOT} remember the coffee order", user_id=MEMBER, first_name="Mallory", **GROUP_CHAT)
    await telegram.await_sent(GROUP, 3)
    assert "remembered [" in models.requests[5].tool_results()[0]["content"]  # repaired, not an internal error
    telegram.user_sends(GROUP, f"{BOT} where is the offsite? and note the retro", user_id=OWNER, **GROUP_CHAT)
    await telegram.await_sent(GROUP, 4)

    recalled, remembered = (r["content"] for r in models.requests[7].tool_results())
    assert "Porto" in recalled
    assert remembered.startswith("remembered [")
    [group_file] = (make_settings().data_dir / "memory" / "chats").glob("*.md")
    kept = group_file.read_bytes()
    assert b"\x00" not in kept
    assert b"Lunch is at noon sharp" in kept and "The caf\ufffd order".encode() in kept
    assert b"The team retro is on Fridays" in kept


async def test_the_fronts_actions_take_cleaned_arguments(telegram, models, start_bot):
    spawn = ToolCall("spawn", {"spec": "Sum up the\x00 notes \ud800 please", "label": "no\u202ete\x07s"})
    models.script(Reply(tool_calls=[spawn, ToolCall("reply", {"text": "on \x1bit\u200b"})]), model="front")
    models.script(Reply(text="summed"), model="back")
    models.responder(lambda req: Reply(text="summed"), model="front")
    app = await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=0)
    telegram.user_sends(OWNER, "sum up my notes")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "on it"
    [task] = app.handler.bus.store.for_chat(f"telegram:{OWNER}")
    assert task.spec == "Sum up the notes \ufffd please" and task.label == "notes"
