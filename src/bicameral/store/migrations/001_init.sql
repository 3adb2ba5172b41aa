-- messages: every inbound update we accepted and every message we sent.
CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    chat         TEXT    NOT NULL,
    direction    TEXT    NOT NULL CHECK (direction IN ('in', 'out')),
    message_id   TEXT,
    update_id    INTEGER,
    channel      TEXT    NOT NULL,
    kind         TEXT    NOT NULL DEFAULT 'message',
    sender_id    TEXT,
    sender_name  TEXT,
    text         TEXT    NOT NULL DEFAULT '',
    reply_to     TEXT,
    payload      TEXT,
    status       TEXT    NOT NULL DEFAULT 'done',
    created_at   REAL    NOT NULL,
    consumed_at  REAL
);
CREATE UNIQUE INDEX messages_update ON messages(channel, update_id) WHERE update_id IS NOT NULL;
CREATE INDEX messages_chat ON messages(chat, id);
CREATE INDEX messages_pending ON messages(status) WHERE status = 'pending';

-- unauthorized_messages: what the gate refused, kept out of the main history.
CREATE TABLE unauthorized_messages (
    id          INTEGER PRIMARY KEY,
    chat        TEXT NOT NULL,
    sender_id   TEXT,
    sender_name TEXT,
    text        TEXT NOT NULL DEFAULT '',
    notified    INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL
);
CREATE INDEX unauthorized_chat ON unauthorized_messages(chat);

-- sessions: the model conversation per chat, for resume after restart.
CREATE TABLE sessions (
    chat        TEXT PRIMARY KEY,
    messages    TEXT NOT NULL,
    updated_at  REAL NOT NULL
);

-- tool_calls: the audit of every tool invocation.
CREATE TABLE tool_calls (
    id          INTEGER PRIMARY KEY,
    chat        TEXT,
    turn_id     TEXT,
    name        TEXT NOT NULL,
    args        TEXT NOT NULL,
    result      TEXT,
    error       TEXT,
    duration_ms REAL NOT NULL,
    created_at  REAL NOT NULL
);
CREATE INDEX tool_calls_chat ON tool_calls(chat, id);

-- rate_limits: fixed one-minute buckets per sender.
CREATE TABLE rate_limits (
    sender_id   TEXT NOT NULL,
    bucket      INTEGER NOT NULL,
    count       INTEGER NOT NULL,
    notified    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sender_id, bucket)
);

-- kv: small named values (e.g. an executor's session id).
CREATE TABLE kv (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
