-- schedules: reminders and scheduled tasks; a one-shot has no cron. Times are UTC epoch seconds.
CREATE TABLE schedules (
    id          INTEGER PRIMARY KEY,
    chat        TEXT NOT NULL,
    creator     TEXT NOT NULL,                -- `channel:user id`, or the chat when no one person made it
    private     INTEGER NOT NULL DEFAULT 1,   -- made in a DM (a task fire then runs as a DM turn)
    kind        TEXT NOT NULL CHECK (kind IN ('text', 'task')),
    body        TEXT NOT NULL,
    cron        TEXT,
    tz          TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'done')),
    next_due    REAL,
    last_fired  REAL,
    protected   TEXT UNIQUE,                  -- seeded by the app; the tools refuse to cancel or edit it
    created_at  REAL NOT NULL
);
CREATE INDEX schedules_due ON schedules(state, next_due);
CREATE INDEX schedules_chat ON schedules(chat, state);
CREATE INDEX schedules_creator ON schedules(creator, state);

-- schedule_fires: one row per firing, written before delivery, so a crash re-delivers it once on start.
CREATE TABLE schedule_fires (
    id            INTEGER PRIMARY KEY,
    schedule_id   INTEGER NOT NULL,
    chat          TEXT NOT NULL,
    creator       TEXT NOT NULL,
    private       INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    body          TEXT NOT NULL,
    due_at        REAL NOT NULL,
    fired_at      REAL NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered')),
    delivered_at  REAL
);
CREATE INDEX schedule_fires_pending ON schedule_fires(status) WHERE status = 'pending';

-- user_timezones: the IANA zone each person set with /timezone.
CREATE TABLE user_timezones (
    user  TEXT PRIMARY KEY,
    tz    TEXT NOT NULL
);
