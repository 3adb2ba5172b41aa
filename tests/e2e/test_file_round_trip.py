"""Files both ways end to end: the user's file reaches the work, the file the work makes comes back as a document."""

from __future__ import annotations

import json
import os
import time

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access
from tests.support.chat import eventually

FAST = dict(mode="bicameral", delivery_pause_scale=0, debounce_ms=150, task_retry_delay_seconds=0)
CSV = "name,qty\nmilk,2\neggs,12\n"
TSV = "name\tqty\nmilk\t2\neggs\t12\n"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64 + b"\xff\xd9"


def _voice_echo(req: Request) -> Reply:
    return Reply(text="Here you go: " + req.last_user_text().split("<result>")[-1].split("</result>")[0].strip())


def _converter(final: str = "Converted groceries.csv to TSV: 2 rows."):
    """A model that reads the CSV it was given, writes the TSV, sends it and reports, one step per request."""

    def reply(req: Request) -> Reply:
        if "groceries.csv" not in json.dumps(req.messages):
            return Reply(text="ok")
        results = req.tool_results()  # the latest step's
        if not results:
            return Reply(tool_calls=[ToolCall("read_file", {"path": "groceries.csv"})])
        last = results[-1]["content"]
        if last == CSV:  # the user's file, read from the workspace
            return Reply(tool_calls=[ToolCall("write_file", {"path": "out/groceries.tsv", "content": TSV})])
        if last.startswith("wrote "):
            return Reply(tool_calls=[ToolCall("send_file", {"path": "out/groceries.tsv"})])
        assert "groceries.tsv" in last and not results[-1]["is_error"], results
        return Reply(text=final)

    return reply


def _copies(app) -> list:
    """The snapshots of sent files still on disk."""
    return [p for p in (app.settings.data_dir / "outgoing").rglob("*") if p.is_file()]


def _age(app, days: float) -> None:
    """Make every snapshot look `days` old, past the retention."""
    then = time.time() - days * 86400
    for path in _copies(app):
        os.utime(path, (then, then))


def _documents(telegram, chat: int = OWNER) -> list[dict]:
    return [m for m in telegram.sent_messages(chat) if m["method"] == "sendDocument"]


async def test_bicameral_convert_this_csv_comes_back_as_a_document(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[
            ToolCall("spawn", {"spec": "Convert the CSV the user sent to TSV and send it back.", "label": "tsv"}),
            ToolCall("reply", {"text": "on it"}),
        ]),
        model="front",
    )
    models.responder(_voice_echo, model="front")
    models.responder(_converter(), model="back")
    app = await start_bot(**FAST)
    telegram.user_sends(OWNER, document=("groceries.csv", CSV.encode()), caption="convert this CSV to TSV please")
    sent = await telegram.await_sent(OWNER, 3, timeout=30)
    assert [m["method"] for m in sent] == ["sendMessage", "sendMessage", "sendDocument"]
    assert sent[0]["text"] == "on it"
    assert sent[1]["text"] == "Here you go: Converted groceries.csv to TSV: 2 rows."
    assert sent[2]["document"]["file_name"] == "groceries.tsv"
    assert sent[2]["file_bytes"] == TSV.encode()
    brief = json.dumps(models.requests_for("back")[0].messages)
    assert "<files>" in brief and 'path=\\"groceries.csv\\"' in brief, "the task is told where the user's file is"
    (task,) = app.tasks.for_chat(f"telegram:{OWNER}")
    assert [a.name for a in task.artifacts] == ["out/groceries.tsv"]
    assert task.delivered_at is not None


async def test_a_photo_reaches_the_back_task_as_an_image(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Describe the photo the user sent."})]),
        model="front",
    )
    models.responder(_voice_echo, model="front")
    models.responder(lambda req: Reply(text="A tiny black square."), model="back")
    app = await start_bot(**FAST)
    telegram.user_sends(OWNER, photo=JPEG, caption="what is this?")
    await telegram.await_sent(OWNER, 1, timeout=20)
    (back,) = models.requests_for("back")
    assert "data:image/jpeg;base64," in json.dumps(back.messages), "the photo's bytes go with the request"
    task = app.tasks.for_chat(f"telegram:{OWNER}")[0]
    assert [a.kind for a in task.attachments] == ["photo"]
    stored = app.stores.db.query_one("SELECT messages FROM task_checkpoints WHERE task_id = ?", (task.id,))
    assert "base64" not in stored["messages"], "a checkpoint keeps the image's path, never its bytes"


async def test_single_mode_sends_the_converted_file_in_the_turn(telegram, models, start_bot):
    models.responder(_converter("Done, here it is."), model="back")
    app = await start_bot(mode="single")
    telegram.user_sends(OWNER, document=("groceries.csv", CSV.encode()), caption="convert this CSV to TSV")
    sent = await telegram.await_sent(OWNER, 2, timeout=30)
    assert [m["method"] for m in sent] == ["sendDocument", "sendMessage"]
    assert sent[0]["file_bytes"] == TSV.encode() and sent[0]["document"]["file_name"] == "groceries.tsv"
    assert sent[1]["text"] == "Done, here it is."
    first = models.requests_for("back")[0]
    assert 'workspace_path=\\"groceries.csv\\"' in json.dumps(first.messages)
    await eventually(lambda: not _copies(app), "the sent file's copy deleted", timeout=20)


async def test_a_result_with_files_held_while_away_survives_a_restart(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[
            ToolCall("spawn", {"spec": "Convert the CSV to TSV.", "label": "the tsv"}),
            ToolCall("reply", {"text": "on it"}),
        ]),
        Reply(text="welcome back!"),
        model="front",
    )
    models.responder(_voice_echo, model="front")
    slow = _converter()

    def back(req: Request) -> Reply:
        reply = slow(req)
        return Reply(text=reply.text, latency=1.5) if reply.text and not reply.tool_calls else reply

    models.responder(back, model="back")
    app = await start_bot(**FAST, away_after_seconds=1.0)
    telegram.user_sends(OWNER, document=("groceries.csv", CSV.encode()), caption="convert this to TSV")
    await telegram.await_sent(OWNER, 1)
    await eventually(lambda: app.tasks.for_chat(f"telegram:{OWNER}")[0].state.value == "completed", "the task", timeout=20)
    assert len(telegram.sent_messages(OWNER)) == 1, "held while the user is away"
    await app.stop()
    # The workspace copy may change or go; what the task chose to send was kept.
    for made in (app.settings.data_dir / "workspaces").glob("*/out/groceries.tsv"):
        made.write_text("overwritten")
    _age(app, 30)  # far past the retention: only the held result keeps it
    app = await start_bot(**FAST, away_after_seconds=1.0)
    assert len(_copies(app)) == 1
    telegram.user_sends(OWNER, "hi again")
    sent = await telegram.await_sent(OWNER, 4, timeout=20)
    assert sent[1]["text"] == "welcome back!"
    assert "finished the tsv" in sent[2]["text"] and "2 rows" in sent[2]["text"]
    assert sent[3]["method"] == "sendDocument" and sent[3]["file_bytes"] == TSV.encode()
    assert len(_documents(telegram)) == 1
    await eventually(lambda: not _copies(app), "the copy deleted", timeout=20)


async def test_a_file_still_to_send_across_a_restart_is_kept_until_it_is_out(telegram, models, start_bot):
    models.responder(_converter("Done, here it is."), model="back")
    telegram.fail_next("sendDocument", status=502)
    app = await start_bot(mode="single", send_retry_base_seconds=2)
    telegram.user_sends(OWNER, document=("groceries.csv", CSV.encode()), caption="convert this CSV to TSV")
    # refused once, waiting to retry
    await eventually(lambda: any(e.attempts for e in app.stores.outbox.pending()), "a refused send", timeout=20)
    await app.stop()
    _age(app, 30)  # far past the retention: only the pending message keeps it
    [copy] = _copies(app)
    app = await start_bot(mode="single")
    assert copy.read_bytes() == TSV.encode(), "kept at start: the outbox still sends it"
    await eventually(lambda: any(m["file_bytes"] == TSV.encode() for m in _documents(telegram)), "the document", timeout=20)
    await eventually(lambda: not _copies(app), "the copy deleted", timeout=20)


async def test_at_start_copies_already_sent_or_past_the_retention_are_deleted(telegram, models, start_bot):
    models.responder(_converter("Done, here it is."), model="back")
    app = await start_bot(mode="single")
    telegram.user_sends(OWNER, document=("groceries.csv", CSV.encode()), caption="convert this CSV to TSV")
    await eventually(lambda: len(_documents(telegram)) == 1 and not _copies(app), "one document, no copy", timeout=20)
    [sent] = app.stores.outbox.file_paths(pending=False)
    await app.stop()
    data = app.settings.data_dir
    left = data / sent  # as a crash between sending and deleting would leave it
    old, young = data / "outgoing" / "telegram_1001" / "a1" / "old.txt", data / "outgoing" / "telegram_1001" / "b2" / "young.txt"
    for path in (left, old, young):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    then = time.time() - 8 * 86400
    os.utime(old, (then, then))
    await start_bot(mode="single", outgoing_keep_days=7)
    assert not left.exists() and not old.exists() and young.exists()


async def test_hostile_file_paths_are_refused_while_other_chats_are_served(telegram, models, start_bot, make_settings, tmp_path):
    friend = 2002
    write_access(make_settings(), policy="open")
    outside = tmp_path / "host-secret.txt"
    outside.write_text("host secret")
    hostile = [
        "../telegram_2002/friend.csv",
        "/etc/passwd",
        str(outside),
        "link-out.txt",
        "big.bin",
        "..%2f..%2fbicameral.db",
    ]

    def model(req: Request) -> Reply:
        text = json.dumps(req.messages)
        if "from=\\\"Bob\\\"" in text:
            return Reply(text="hi Bob")
        if not req.tool_results():
            return Reply(tool_calls=[ToolCall("send_file", {"path": p}) for p in hostile])
        return Reply(text="none of those could be sent")

    models.responder(model, model="back")
    app = await start_bot(mode="single", send_file_max_bytes=2048, tool_error_max_count=10)
    telegram.user_sends(friend, document=("friend.csv", b"private,data\n"), caption="keep this", first_name="Bob")
    await telegram.await_sent(friend, 1, timeout=20)
    workspaces = app.settings.data_dir / "workspaces"
    owner_space = workspaces / f"telegram_{OWNER}"
    owner_space.mkdir(parents=True, exist_ok=True)
    (owner_space / "link-out.txt").symlink_to(outside)
    (owner_space / "big.bin").write_bytes(b"x" * 4096)
    telegram.user_sends(OWNER, "send me those files")
    telegram.user_sends(friend, "hello again", first_name="Bob")
    await telegram.await_sent(OWNER, 1, timeout=20)
    await telegram.await_sent(friend, 2, timeout=20)
    assert telegram.sent_messages(OWNER)[0]["text"] == "none of those could be sent"
    assert [m["text"] for m in telegram.sent_messages(friend)] == ["hi Bob", "hi Bob"]
    assert _documents(telegram, OWNER) == [] and _documents(telegram, friend) == []
    results = next(r for r in models.requests_for("back") if r.tool_results()).tool_results()
    reasons = [r["content"] for r in results]
    assert len(reasons) == len(hostile) and all(r.startswith("ERROR: not sent:") for r in reasons), reasons
    assert "'..'" in reasons[0] and "absolute" in reasons[1] and "absolute" in reasons[2]
    assert "outside the workspace" in reasons[3] and "at most 2048 bytes" in reasons[4] and "no file" in reasons[5]
    assert not (app.settings.data_dir / "outgoing").exists() or not any((app.settings.data_dir / "outgoing").rglob("*.*"))


async def test_an_image_telegram_refuses_as_a_photo_goes_as_a_document(telegram, models, start_bot):
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    app = await start_bot(mode="single")
    workspace = app.settings.data_dir / "workspaces" / f"telegram_{OWNER}"
    telegram.fail_next("sendPhoto", status=400, description="Bad Request: PHOTO_INVALID_DIMENSIONS")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "wide.png").write_bytes(png)
    models.script(Reply(tool_calls=[ToolCall("send_file", {"path": "wide.png"})]), Reply(text="there it is"), model="back")
    telegram.user_sends(OWNER, "send me the chart")
    sent = await telegram.await_sent(OWNER, 2, timeout=20)
    assert [m["method"] for m in sent] == ["sendDocument", "sendMessage"]
    assert sent[0]["file_bytes"] == png and sent[0]["document"]["file_name"] == "wide.png"
    assert [c.status for c in telegram.calls_to("sendPhoto")] == [400]
