"""The tasks, task_events and task_checkpoints tables."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from bicameral.events import Attachment, Authority
from bicameral.redaction import scrub, scrub_obj
from bicameral.sandbox.artifacts import Artifact
from bicameral.store.sql import Row, SqlDatabase
from bicameral.tasks.task import EventKind, Task, TaskEvent, TaskState
from bicameral.types import Clock

OPEN_STATES = tuple(state.value for state in TaskState if state.is_open)  # as the tasks_open index lists them
_REDACTED_FIELDS = ("spec", "context", "result", "error", "label")


class TaskStore:
    def __init__(self, db: SqlDatabase, clock: Clock = time.time, redact: Callable[[str], str] = scrub) -> None:
        self._db = db
        self._clock = clock
        self._redact = redact  # model output is scrubbed before it is stored

    def create(self, task: Task) -> None:
        with self._db.tx() as conn:
            conn.execute(
                """INSERT INTO tasks (id, chat, label, spec, context, state, parent_id, origin_message, thread_id,
                                      created_at, updated_at, attachments, schedule_id, authority)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (task.id, task.chat, task.label, self._redact(task.spec), self._redact(task.context),
                 task.state.value, task.parent_id,
                 task.origin_message, task.thread_id, task.created_at, task.updated_at, _files_json(task.attachments),
                 task.schedule_id, task.authority.dumps() if task.authority else None),
            )

    def get(self, task_id: str) -> Task | None:
        row = self._db.query_one("SELECT * FROM tasks WHERE id = ?", (task_id,))
        return _task(row) if row else None

    def update(self, task_id: str, **fields: object) -> Task:
        fields["updated_at"] = self._clock()
        for name in _REDACTED_FIELDS:
            value = fields.get(name)
            if isinstance(value, str):
                fields[name] = self._redact(value)
        artifacts = fields.get("artifacts")
        if isinstance(artifacts, tuple):
            fields["artifacts"] = _files_json(artifacts)
        authority = fields.get("authority")
        if isinstance(authority, Authority):
            fields["authority"] = authority.dumps()
        state = fields.get("state")
        if isinstance(state, TaskState):
            fields["state"] = state.value
        assignments = ", ".join(f"{name} = ?" for name in fields)
        with self._db.tx() as conn:
            conn.execute(f"UPDATE tasks SET {assignments} WHERE id = ?", (*fields.values(), task_id))
        task = self.get(task_id)
        assert task is not None
        return task

    def for_chat(self, chat: str, *, open_only: bool = False, limit: int = 20) -> list[Task]:
        if open_only:
            rows = self._db.query(
                f"SELECT * FROM tasks WHERE chat = ? AND state IN {OPEN_STATES} ORDER BY created_at", (chat,)
            )
        else:
            rows = self._db.query(
                "SELECT * FROM tasks WHERE chat = ? ORDER BY created_at DESC LIMIT ?", (chat, limit)
            )
            rows = list(reversed(rows))
        return [_task(row) for row in rows]

    def open_tasks(self) -> list[Task]:
        rows = self._db.query(f"SELECT * FROM tasks WHERE state IN {OPEN_STATES} ORDER BY created_at")
        return [_task(row) for row in rows]

    def open_counts(self) -> dict[str, int]:
        """How many tasks are in each open state (pending, running, paused), across chats."""
        rows = self._db.query(f"SELECT state, COUNT(*) FROM tasks WHERE state IN {OPEN_STATES} GROUP BY state")
        return {state: 0 for state in OPEN_STATES} | {row[0]: int(row[1]) for row in rows}

    def undelivered(self, chat: str) -> list[Task]:
        rows = self._db.query(
            """SELECT * FROM tasks WHERE chat = ? AND state IN ('completed', 'failed')
               AND delivered_at IS NULL ORDER BY finished_at""",
            (chat,),
        )
        return [_task(row) for row in rows]

    def held_files(self) -> set[str]:
        """The snapshots a result still to be sent points at: a task still open, or completed and not yet delivered."""
        rows = self._db.query(
            f"""SELECT artifacts FROM tasks WHERE artifacts != '[]' AND
                (state IN {OPEN_STATES} OR (state = 'completed' AND delivered_at IS NULL))"""
        )
        return {a["path"] for row in rows for a in json.loads(row["artifacts"])}

    def count(self, chat: str) -> int:
        row = self._db.query_one("SELECT COUNT(*) FROM tasks WHERE chat = ?", (chat,))
        return int(row[0]) if row else 0

    # --- events ---

    def add_event(self, event: TaskEvent) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO task_events (task_id, kind, data, ts) VALUES (?, ?, ?, ?)",
                (event.task_id, event.kind.value, self._redact(event.data), event.ts),
            )

    def events(self, task_id: str) -> list[TaskEvent]:
        rows = self._db.query("SELECT * FROM task_events WHERE task_id = ? ORDER BY id", (task_id,))
        return [_event(row) for row in rows]

    def last_event(self, task_id: str) -> TaskEvent | None:
        row = self._db.query_one("SELECT * FROM task_events WHERE task_id = ? ORDER BY id DESC LIMIT 1", (task_id,))
        return _event(row) if row else None

    # --- checkpoints ---

    def checkpoint(self, task_id: str, reason: str, messages: list[dict[str, Any]]) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO task_checkpoints (task_id, reason, messages, ts) VALUES (?, ?, ?, ?)",
                (task_id, reason, json.dumps(scrub_obj(messages, self._redact), ensure_ascii=False), self._clock()),
            )
            # Keep the latest few: a long task must not grow the database without bound.
            conn.execute(
                """DELETE FROM task_checkpoints WHERE task_id = ? AND id NOT IN
                   (SELECT id FROM task_checkpoints WHERE task_id = ? ORDER BY id DESC LIMIT 5)
                   AND reason = 'step'""",
                (task_id, task_id),
            )

    def latest_checkpoint(self, task_id: str) -> list[dict[str, Any]] | None:
        row = self._db.query_one(
            "SELECT messages FROM task_checkpoints WHERE task_id = ? ORDER BY id DESC LIMIT 1", (task_id,)
        )
        return json.loads(row["messages"]) if row else None


def _task(row: Row) -> Task:
    return Task(
        id=row["id"],
        chat=row["chat"],
        spec=row["spec"],
        state=TaskState(row["state"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        label=row["label"],
        context=row["context"],
        parent_id=row["parent_id"],
        origin_message=row["origin_message"],
        thread_id=row["thread_id"],
        result=row["result"],
        error=row["error"],
        attempts=row["attempts"],
        finished_at=row["finished_at"],
        delivered_at=row["delivered_at"],
        attachments=tuple(Attachment(**a) for a in json.loads(row["attachments"] or "[]")),
        artifacts=tuple(Artifact(**a) for a in json.loads(row["artifacts"] or "[]")),
        schedule_id=row["schedule_id"],
        authority=Authority.loads(row["authority"]),
    )


def _files_json(files: Sequence[Attachment | Artifact]) -> str:
    return json.dumps([asdict(f) for f in files], ensure_ascii=False)


def _event(row: Row) -> TaskEvent:
    return TaskEvent(row["task_id"], EventKind(row["kind"]), row["ts"], row["data"])
