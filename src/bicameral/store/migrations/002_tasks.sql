-- tasks: the back chamber's work items; open ones resume after a restart.
CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    chat        TEXT NOT NULL,
    label       TEXT,
    spec        TEXT NOT NULL,
    context     TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL,
    parent_id   TEXT,
    origin_message TEXT,
    thread_id   TEXT,
    result      TEXT,
    error       TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    finished_at REAL,
    delivered_at REAL
);
CREATE INDEX tasks_chat ON tasks(chat, created_at);
CREATE INDEX tasks_open ON tasks(state) WHERE state IN ('pending', 'running', 'paused');

-- task_events: the real signals a front may report (started, progress, completed, failed, ...).
CREATE TABLE task_events (
    id       INTEGER PRIMARY KEY,
    task_id  TEXT NOT NULL REFERENCES tasks(id),
    kind     TEXT NOT NULL,
    data     TEXT NOT NULL DEFAULT '',
    ts       REAL NOT NULL
);
CREATE INDEX task_events_task ON task_events(task_id, id);

-- task_checkpoints: the back's transcript at each step, so redirect and restart lose no work.
CREATE TABLE task_checkpoints (
    id        INTEGER PRIMARY KEY,
    task_id   TEXT NOT NULL REFERENCES tasks(id),
    reason    TEXT NOT NULL,
    messages  TEXT NOT NULL,
    ts        REAL NOT NULL
);
CREATE INDEX task_checkpoints_task ON task_checkpoints(task_id, id);
