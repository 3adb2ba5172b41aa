"""What a back task is told: its brief, and the refusal of direct messages to the user."""

from __future__ import annotations

from datetime import UTC, datetime

from bicameral.events import Action, ActionResult
from bicameral.tasks.task import Task


async def no_direct_messages(action: Action) -> ActionResult:
    # The back never speaks to the user directly: results go through the front's delivery.
    return ActionResult.failed("the back chamber cannot message the user; return the result instead")


def task_brief(task: Task) -> str:
    parts = [f"<task id={task.id!r}>", task.spec, "</task>"]
    if task.context:
        parts += ["<context>", task.context, "</context>"]
    parts.append(f"Current time: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.")
    return "\n".join(parts)
