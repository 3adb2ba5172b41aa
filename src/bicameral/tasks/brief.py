"""What a back task is told: its brief with the files the user sent, and the refusal of direct messages to the user."""

from __future__ import annotations

from datetime import UTC, datetime

from bicameral.events import Action, ActionResult, Attachment
from bicameral.markup import quoteattr
from bicameral.models.base import ImageBlock
from bicameral.sandbox.artifacts import Outgoing
from bicameral.tasks.executor import TaskControl
from bicameral.tasks.task import Task


async def no_direct_messages(action: Action) -> ActionResult:
    # The back never speaks to the user directly: results go through the front's delivery.
    return ActionResult.failed("the back chamber cannot message the user; return the result instead")


def task_brief(task: Task) -> str:
    parts = [f"<task id={task.id!r}>", task.spec, "</task>"]
    if task.context:
        parts += ["<context>", task.context, "</context>"]
    files = [a for a in task.attachments if a.workspace_path]
    if files:
        parts.append("<files> (the user sent these; they are in your workspace, for the file tools and `run`)")
        parts += [_file(a) for a in files]
        parts.append("</files>")
    parts.append(f"Current time: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.")
    return "\n".join(parts)


def _file(attachment: Attachment) -> str:
    """One sent file: where it is, and where its text is (a document's whole text, read once at intake)."""
    text = f" text_path={quoteattr(attachment.text_path)}" if attachment.text_path else ""
    note = f" note={quoteattr(attachment.note)}" if attachment.note else ""
    where = quoteattr(attachment.workspace_path or "")
    return f'<file kind={quoteattr(attachment.kind)} path={where} size="{attachment.size}"{text}{note}/>'


def task_images(task: Task) -> list[ImageBlock]:
    """The photos the user sent with the task, as images for the model (by path: bytes are read per request)."""
    return [ImageBlock(path=a.path, media_type=a.mime or "image/jpeg") for a in task.attachments if a.kind == "photo"]


def task_outgoing(task: Task, control: TaskControl, *, max_files: int, max_bytes: int) -> Outgoing:
    """The files the task's result sends: those chosen before a restart, then each new one stored as it is chosen."""
    return Outgoing(max_files=max_files, max_bytes=max_bytes, items=list(task.artifacts), on_change=control.keep_files)
