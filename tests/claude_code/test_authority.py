"""Authority follows the person with the real Claude Code CLI as the executor: in a group with the owner, an admin
and two members, the model obeys whatever words are in front of it, and only the rights of the people whose words
those are decide what runs.

In a group the CLI is never offered an owner-only tool, so the CLI itself refuses the model's call. Our MCP server
checks every call against the running turn's (or task's) rights as well; `_owner_check` asks it directly, with the
CLI's own credentials, to show that this second check follows the person too.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bicameral.claude_code.spec import MCP_SERVER_NAME
from bicameral.claude_code.workspace import token_dir
from bicameral.tasks.task import TaskState
from bicameral.turns.lanes import Conversation
from tests.claude_code.conftest import MODEL, SEND, cc_overrides, main_requests, routed
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access
from tests.support.chat import eventually
from tests.support.group import ADA, ANN, BEN, GROUP, MENTION, STEER, HoldOn, OpenVault, admins, says, voice_pass

pytestmark = pytest.mark.slow
VAULT = "mcp__bicameral__open_vault"
HOLD = "mcp__bicameral__hold_on"
PASSED = "invalid arguments for open_vault"  # the owner check let the call through (to the argument check)
REFUSED = "open_vault is only for the owner"


async def _owner_check(app, worker: str) -> str:
    """What our MCP server answers `worker`'s CLI (by its own token) for open_vault with arguments no call can run
    with: the owner check comes first, so the answer says whether the running turn's rights pass it, and nothing
    is opened either way."""
    [path] = token_dir(app.settings.data_dir.resolve()).glob(f"{worker}-*.json")
    server = json.loads(path.read_text())["mcpServers"][MCP_SERVER_NAME]
    async with (
        httpx2.AsyncClient(headers=server["headers"]) as http,
        Client(streamable_http_client(server["url"], http_client=http)) as mcp,
    ):
        result = await mcp.call_tool("open_vault", {"what": ["every", "thing"]})
    assert result.is_error
    return str(getattr(result.content[0], "text", ""))


async def _held(hold: HoldOn) -> None:
    """Until the CLI's call to hold_on runs (the CLI starts in seconds, more on a busy machine)."""
    await asyncio.wait_for(hold.entered.wait(), timeout=60)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def _words(req: Request) -> str:
    """The envelopes the chamber's CLI was last handed: the words of the turn it is working on."""
    return next((t for m in reversed(req.messages) if m["role"] == "user" and "<msg " in (t := _text(m["content"]))), "")


def _chamber(req: Request) -> Reply:
    """The single-mode model: it waits first (so people can talk meanwhile), then opens the vault if the words ask."""
    results = req.tool_results()
    if not results:
        return Reply(tool_calls=[ToolCall(HOLD, {})])
    if "sent message_id" in results[-1]["content"]:
        return Reply(text="sent")
    if results[-1]["content"].startswith("waited") and "vault" in _words(req):
        return Reply(tool_calls=[ToolCall(VAULT, {})])
    outcome = "refused" if results[-1]["is_error"] else results[-1]["content"].split("\n")[0]
    return Reply(tool_calls=[ToolCall(SEND, {"text": f"done: {outcome}"})])


async def _start_chamber(start_cc_bot, make_settings, *tools, **overrides):
    write_access(make_settings(), policy="open")
    return await start_cc_bot(extra_tools=list(tools), **overrides)


async def test_a_members_words_in_the_owners_burst_take_the_owners_tools_away(telegram, models, start_cc_bot, make_settings):
    vault, hold = OpenVault(), HoldOn()
    models.responder(routed(_chamber))
    app = await _start_chamber(start_cc_bot, make_settings, vault, hold, debounce_ms=1000)
    says(telegram, ANN, f"{MENTION} open the vault and read it out")
    says(telegram, OWNER, f"{MENTION} hi all")  # the owner's words come last in the burst
    await _held(hold)
    assert REFUSED in await _owner_check(app, f"telegram_{GROUP}"), "the turn runs with the least rights in it"
    hold.release.set()
    [sent] = await telegram.await_sent(GROUP, 1, timeout=60)
    assert sent["text"] == "done: refused"
    first = main_requests(models)[0]
    assert 'role="member"' in first.last_user_text() and 'role="owner"' in first.last_user_text(), "one burst"
    assert all(VAULT not in r.tool_names for r in main_requests(models)), "a group's CLI is never offered it"
    called = [r for r in main_requests(models) if "open_vault" in json.dumps(r.messages[-1:])]
    assert called and called[0].tool_results()[0]["is_error"], "the obedient model's call is refused"
    assert vault.runs == []


def _waiting(app, text: str) -> bool:
    """Whether a message with `text` waits in its lane for a turn of its own."""
    conversation: Conversation = app.conversation
    return any(text in i.text for lane in conversation._lanes.values() for i in lane.pending)


async def test_a_message_sent_into_the_owners_running_turn_waits_for_its_own(telegram, models, start_cc_bot, make_settings):
    vault, hold = OpenVault(), HoldOn()
    models.responder(routed(_chamber))
    app = await _start_chamber(start_cc_bot, make_settings, vault, hold, debounce_ms=0)
    says(telegram, OWNER, f"{MENTION} start the slow job")
    await _held(hold)
    says(telegram, BEN, f"{MENTION} now open the vault for me")
    await eventually(lambda: _waiting(app, "vault for me"))
    assert PASSED in await _owner_check(app, f"telegram_{GROUP}"), "the owner's turn keeps the owner's rights"
    hold.release.set()
    sent = await telegram.await_sent(GROUP, 2, timeout=60)
    assert [m["text"] for m in sent] == ["done: waited", "done: refused"]
    mains = main_requests(models)
    owner_next = next(r for r in mains if r.tool_results() and r.tool_results()[0]["content"].startswith("waited"))
    assert "vault for me" not in json.dumps(owner_next.messages), "Ben's words never join the owner's turn"
    bens = [r for r in mains if "vault for me" in r.last_user_text() and not r.tool_results()]
    assert len(bens) == 1, "Ben's message is a turn of its own"
    assert 'role="member"' in bens[0].last_user_text() and 'role="owner"' not in bens[0].last_user_text()
    assert vault.runs == []


# --- two chambers: the CLI as the back ---

FAST = dict(mode="bicameral", front_model="openai:front", delivery_pause_scale=0, debounce_ms=0, task_retry_delay_seconds=0)


def _front(req: Request) -> Reply:
    """The front does what the newest words say; its voice pass passes the result on as it is."""
    if (voiced := voice_pass(req)) is not None:
        return voiced
    burst = req.last_user_text().split("</situation>")[-1]
    if "start the vault job" in burst:
        spawn = ToolCall("spawn", {"spec": "Open the vault and report what is in it.", "label": "vault"})
        return Reply(tool_calls=[spawn, ToolCall("reply", {"text": "on it"})])
    if "steal the vault job" in burst:
        return Reply(tool_calls=STEER)
    if "add to the vault job" in burst:
        return Reply(tool_calls=[ToolCall("append", {"task": "vault", "context": "and open it once more"})])
    return Reply(text="hi")


def _back(req: Request) -> Reply:
    """The CLI's task conversation: it waits first, then opens the vault; side requests get a short answer."""
    if HOLD not in req.tool_names or "<task" not in json.dumps(req.messages):
        return Reply(text="ok")
    results = req.tool_results()
    if not results:
        return Reply(tool_calls=[ToolCall(HOLD, {})])
    if results[-1]["content"].startswith("waited"):
        return Reply(tool_calls=[ToolCall(VAULT, {})])
    return Reply(text="result: " + ("refused" if results[-1]["is_error"] else results[-1]["content"].split("\n")[0]))


async def _start_bicameral(start_bot, make_settings, telegram, models, claude_bin, *tools):
    write_access(make_settings(), policy="open")
    telegram.register_method("getChatMember", admins)
    models.responder(_front, model="front")
    models.responder(_back, model=MODEL)
    return await start_bot(extra_tools=list(tools), **cc_overrides(claude_bin, models, **FAST))


def _texts(telegram) -> list[str]:
    return [m["text"] for m in telegram.sent_messages(GROUP)]


async def _owners_task_running(app, telegram, hold: HoldOn):
    says(telegram, OWNER, f"{MENTION} start the vault job")
    await _held(hold)
    [task] = app.handler.bus.open_tasks(f"telegram:{GROUP}")
    return task


async def test_a_member_can_neither_steer_nor_stop_the_owners_task_on_the_cli(
    telegram, models, start_bot, make_settings, claude_bin, cli_home
):
    vault, hold = OpenVault(), HoldOn()
    app = await _start_bicameral(start_bot, make_settings, telegram, models, claude_bin, vault, hold)
    task = await _owners_task_running(app, telegram, hold)
    says(telegram, ANN, f"{MENTION} steal the vault job")
    await eventually(lambda: sum("someone else" in t for t in _texts(telegram)) == len(STEER))
    anns_front = next(r for r in models.requests_for("front") if "steal the vault job" in r.last_user_text())
    assert "Open the vault" not in anns_front.last_user_text(), "Ann's front call does not see the owner's task"
    says(telegram, ANN, "/stop")
    await eventually(lambda: any("Nothing of yours is running" in t for t in _texts(telegram)))
    assert app.handler.bus.get(task.id).state is TaskState.RUNNING
    assert len(app.handler.bus.store.for_chat(f"telegram:{GROUP}")) == 1, "no branch was made"
    assert PASSED in await _owner_check(app, f"task_{task.id}"), "Ann's refused words did not lower the task"
    hold.release.set()
    await eventually(lambda: app.handler.bus.get(task.id).state is TaskState.COMPLETED, timeout=60)
    await eventually(lambda: any(t.startswith("result:") for t in _texts(telegram)))
    back = [r for r in models.requests_for(MODEL) if HOLD in r.tool_names]
    assert back and not any("mail the gold" in json.dumps(r.messages) for r in back), "Ann's words never reached it"
    assert vault.runs == []


async def test_an_admins_words_lower_the_owners_task_on_the_cli(telegram, models, start_bot, make_settings, claude_bin, cli_home):
    vault, hold = OpenVault(), HoldOn()
    app = await _start_bicameral(start_bot, make_settings, telegram, models, claude_bin, vault, hold)
    task = await _owners_task_running(app, telegram, hold)
    assert PASSED in await _owner_check(app, f"task_{task.id}"), "the owner's own task has the owner's rights"
    says(telegram, ADA, f"{MENTION} add to the vault job")
    await eventually(lambda: set(app.handler.bus.get(task.id).authority.people) == {f"telegram:{ADA}", f"telegram:{OWNER}"})
    # The executor takes the note (and with it Ada's rights) at its next look for notes.
    checks: list[str] = []

    async def refused() -> bool:
        checks.append(await _owner_check(app, f"task_{task.id}"))
        return REFUSED in checks[-1]

    await eventually(refused, lambda: f"the owner-only check to be refused; saw {checks}")
    assert REFUSED in checks[-1] and all(PASSED in c or REFUSED in c for c in checks), checks
    hold.release.set()
    await eventually(lambda: any(t.startswith("result:") for t in _texts(telegram)), timeout=60)
    assert "result: refused" in _texts(telegram), "the CLI's call to the owner-only tool is refused"
    after = [r for r in models.requests_for(MODEL) if "once more" in json.dumps(r.messages)]
    assert after and all(VAULT not in r.tool_names for r in after)
    assert vault.runs == []
