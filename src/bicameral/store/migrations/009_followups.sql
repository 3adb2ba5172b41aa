-- Follow-ups become schedules: the front's "ask if they go quiet" question is a schedule of kind
-- 'followup' (never listed to the user, never counted against a limit). SQLite cannot change a CHECK,
-- so the table is rebuilt with its rows and ids kept.
CREATE TABLE schedules_new (
    id          INTEGER PRIMARY KEY,
    chat        TEXT NOT NULL,
    creator     TEXT NOT NULL,
    private     INTEGER NOT NULL DEFAULT 1,
    kind        TEXT NOT NULL CHECK (kind IN ('text', 'task', 'followup')),
    body        TEXT NOT NULL,
    cron        TEXT,
    tz          TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'done')),
    next_due    REAL,
    last_fired  REAL,
    protected   TEXT UNIQUE,
    created_at  REAL NOT NULL
);
INSERT INTO schedules_new (id, chat, creator, private, kind, body, cron, tz, state, next_due, last_fired, protected, created_at)
    SELECT id, chat, creator, private, kind, body, cron, tz, state, next_due, last_fired, protected, created_at FROM schedules;
DROP TABLE schedules;
ALTER TABLE schedules_new RENAME TO schedules;
CREATE INDEX schedules_due ON schedules(state, next_due);
CREATE INDEX schedules_chat ON schedules(chat, state);
CREATE INDEX schedules_creator ON schedules(creator, state);

-- When the fire's schedule was set: a follow-up is dropped if the user spoke after it.
ALTER TABLE schedule_fires ADD COLUMN set_at REAL;
