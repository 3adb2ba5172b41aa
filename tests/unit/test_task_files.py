"""A task's files: the user's go into its brief and notes, the result's are stored as they are chosen."""

from __future__ import annotations

import asyncio

from bicameral.events import Attachment
from bicameral.sandbox.artifacts import Outgoing
from bicameral.sandbox.workspace import workspace_for
from bicameral.store import Stores
from bicameral.tasks.brief import task_brief, task_images, task_outgoing
from bicameral.tasks.bus import TaskBus
from bicameral.tasks.executor import Executor
from bicameral.tasks.store import TaskStore
from bicameral.tasks.task import EventKind, TaskOutcome

CSV = Attachment(kind="document", path="attachments/1/5-data.csv", name="data.csv", size=12, workspace_path="data.csv")
PHOTO = Attachment(kind="photo", path="attachments/1/6-photo.jpg", mime="image/jpeg", size=70, workspace_path="photo.jpg")


class Attaching(Executor):
    """Attaches a workspace file through the task's Outgoing, then waits for a note before finishing."""

    def __init__(self, data_dir) -> None:
        self.data_dir = data_dir
        self.attached = asyncio.Event()
        self.release = asyncio.Event()
        self.briefs: list[str] = []
        self.notes: list[str] = []
        self.outgoing: Outgoing | None = None

    async def run(self, task, control):
        self.briefs.append(task_brief(task))
        self.outgoing = task_outgoing(task, control, max_files=3, max_bytes=1000)
        self.outgoing.add(self.data_dir, task.chat, "out.tsv")
        self.attached.set()
        await self.release.wait()
        self.notes += control.drain_notes()
        return TaskOutcome(result="converted")


async def test_files_go_in_with_the_brief_and_come_back_stored_with_the_task(tmp_path):
    stores = Stores.open(tmp_path / "db.sqlite")
    data_dir = tmp_path / "data"
    (workspace_for(data_dir, "telegram:1") / "out.tsv").write_text("a\tb\n")
    executor = Attaching(data_dir)
    finished = asyncio.Event()

    async def on_event(task, event) -> None:
        if event.kind is EventKind.COMPLETED:
            finished.set()

    bus = TaskBus(TaskStore(stores.db), executor, on_event=on_event, progress_interval=0, retry_delay=0)
    try:
        task = await bus.spawn("telegram:1", "convert it", attachments=(CSV, PHOTO))
        await asyncio.wait_for(executor.attached.wait(), 10)
        # Stored as soon as it was chosen: a restart before the result keeps it.
        assert [a.name for a in bus.get(task.id).artifacts] == ["out.tsv"]
        await bus.append(task.id, "and this one too", attachments=(CSV,))
        executor.release.set()
        await asyncio.wait_for(finished.wait(), 10)
    finally:
        await bus.close()
    brief = executor.briefs[0]
    assert '<file kind="document" path="data.csv" size="12"/>' in brief and 'path="photo.jpg"' in brief
    assert "data.csv" in executor.notes[0] and "in your workspace" in executor.notes[0]
    done = TaskStore(stores.db).get(task.id)
    assert done is not None and done.attachments == (CSV, PHOTO)
    (artifact,) = done.artifacts
    assert artifact.name == "out.tsv" and (data_dir / artifact.path).read_text() == "a\tb\n"
    assert [b.path for b in task_images(done)] == [PHOTO.path], "photos go as images by path, never bytes"
    stores.close()
