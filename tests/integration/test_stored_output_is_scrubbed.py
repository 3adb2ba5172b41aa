"""Model and tool output is scrubbed before it is stored: sessions, outbound messages, the tool audit, tasks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import BaseModel

from bicameral.store import Stores
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import Task, TaskState
from bicameral.tools.base import Tool, ToolContext, ToolResult
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall

ANTHROPIC_KEY = "sk-ant-api03-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kL9n"
GITHUB_TOKEN = "ghp_" + "x1Y2z3A4b5C6d7E8f9G0h1I2j3K4l5M6n7O8"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"


class _Args(BaseModel):
    name: str


class ReadSecretTool(Tool):
    """A tool that hands back a credential, as a careless file read would."""

    name = "read_secret"
    description = "Read a named secret."
    args_model = _Args

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        return ToolResult(f"the value is {AWS_KEY_ID}")


def database_dump(path: Path) -> str:
    conn = sqlite3.connect(path, timeout=5)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


async def test_a_turns_model_and_tool_output_is_stored_redacted(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("read_secret", {"name": GITHUB_TOKEN})]),
        Reply(text=f"Here it is: {ANTHROPIC_KEY}"),
    )
    app = await start_bot(extra_tools=[ReadSecretTool()], debounce_ms=0)
    telegram.user_sends(OWNER, "read my secret")
    await telegram.await_sent(OWNER, 1)
    assert AWS_KEY_ID in str(models.requests[1].tool_results())  # the model itself did see the tool's output
    dump = database_dump(app.settings.db_path)
    assert "read_secret" in dump and "[REDACTED:" in dump
    for secret in (ANTHROPIC_KEY, GITHUB_TOKEN, AWS_KEY_ID):
        assert secret not in dump, f"{secret[:8]}… stored raw"


def test_task_results_events_and_checkpoints_are_stored_redacted(tmp_path):
    stores = Stores.open(tmp_path / "bicameral.db")
    try:
        tasks = TaskStore(stores.db)
        task = Task(id="t1", chat="telegram:1", spec="find the key", state=TaskState.PENDING, created_at=0, updated_at=0)
        tasks.create(task)
        tasks.checkpoint("t1", "step", [{"role": "tool", "content": f"found {GITHUB_TOKEN}"}])
        tasks.update("t1", state=TaskState.COMPLETED, result=f"the key is {ANTHROPIC_KEY}", error=None)
        assert GITHUB_TOKEN not in str(tasks.latest_checkpoint("t1"))
        assert "[REDACTED:github_token]" in str(tasks.latest_checkpoint("t1"))
        assert tasks.get("t1").result == "the key is [REDACTED:anthropic_key]"
        dump = database_dump(tmp_path / "bicameral.db")
        assert GITHUB_TOKEN not in dump and ANTHROPIC_KEY not in dump
    finally:
        stores.close()
