"""Files through the real Claude Code CLI: the back task reads the user's CSV and sends its TSV with the result."""

from __future__ import annotations

import json

from tests.claude_code.conftest import MODEL, cc_overrides
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall

READ = "mcp__bicameral__read_file"
WRITE = "mcp__bicameral__write_file"
SEND_FILE = "mcp__bicameral__send_file"
CSV = "name,qty\nmilk,2\neggs,12\n"
TSV = "name\tqty\nmilk\t2\neggs\t12\n"


def _back(req: Request) -> Reply:
    """The CLI's task conversation, one step per request; side requests get a short answer."""
    if SEND_FILE not in req.tool_names or "<task" not in json.dumps(req.messages):
        return Reply(text="ok")
    results = req.tool_results()
    if not results:
        return Reply(tool_calls=[ToolCall(READ, {"path": "groceries.csv"})])
    last = results[-1]["content"]
    if "milk,2" in last:
        return Reply(tool_calls=[ToolCall(WRITE, {"path": "groceries.tsv", "content": TSV})])
    if "wrote" in last:
        return Reply(tool_calls=[ToolCall(SEND_FILE, {"path": "groceries.tsv"})])
    assert "delivered with your result" in last, results
    return Reply(text="Converted groceries.csv to TSV: 2 rows.")


async def test_a_cli_task_sends_the_file_it_made_with_its_result(telegram, models, start_bot, claude_bin, cli_home):
    models.script(
        Reply(tool_calls=[
            ToolCall("spawn", {"spec": "Convert the CSV the user sent to TSV and send it back.", "label": "tsv"}),
            ToolCall("reply", {"text": "on it"}),
        ]),
        model="front",
    )
    models.responder(lambda req: Reply(text="Here you go: " + req.last_user_text()), model="front")
    models.responder(_back, model=MODEL)
    overrides = cc_overrides(claude_bin, models, mode="bicameral", front_model="openai:front", delivery_pause_scale=0)
    app = await start_bot(**overrides)
    telegram.user_sends(OWNER, document=("groceries.csv", CSV.encode()), caption="convert this to TSV")
    sent = await telegram.await_sent(OWNER, 3, timeout=90)
    assert [m["method"] for m in sent] == ["sendMessage", "sendMessage", "sendDocument"]
    assert "2 rows" in sent[1]["text"]
    assert sent[2]["document"]["file_name"] == "groceries.tsv" and sent[2]["file_bytes"] == TSV.encode()
    (task,) = app.tasks.for_chat(f"telegram:{OWNER}")
    assert [a.name for a in task.artifacts] == ["groceries.tsv"]
    assert [r["name"] for r in reversed(app.stores.tool_calls.recent())] == ["read_file", "write_file", "send_file"]


async def test_a_photo_reaches_the_cli_task_as_an_image(telegram, models, start_bot, claude_bin, cli_home):
    # Only the header matters here: a start-of-frame segment saying 1x1, which is what the CLI reads.
    jpeg = bytes.fromhex("ffd8ffc0001108000100010301110002110103110100ffd9")
    models.script(Reply(tool_calls=[ToolCall("spawn", {"spec": "Describe the photo the user sent."})]), model="front")
    models.responder(lambda req: Reply(text="Here you go: " + req.last_user_text()), model="front")
    models.responder(lambda req: Reply(text="A tiny black square." if SEND_FILE in req.tool_names else "ok"), model=MODEL)
    overrides = cc_overrides(claude_bin, models, mode="bicameral", front_model="openai:front", delivery_pause_scale=0)
    await start_bot(**overrides)
    telegram.user_sends(OWNER, photo=jpeg, caption="what is this?")
    sent = await telegram.await_sent(OWNER, 1, timeout=90)
    assert "black square" in sent[0]["text"]
    task_requests = [r for r in models.requests if SEND_FILE in r.tool_names]
    images = [b for r in task_requests for m in r.messages if isinstance(m["content"], list) for b in m["content"]]
    assert any(b.get("type") == "image" and b["source"]["media_type"] == "image/jpeg" for b in images)
