-- outbox: every message we mean to send, recorded before its first attempt and kept until sent or given up.
CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY,
    chat         TEXT    NOT NULL,
    turn_id      TEXT,
    action       TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'given_up')),
    answers      TEXT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    not_before   REAL    NOT NULL,
    last_error   TEXT,
    created_at   REAL    NOT NULL,
    finished_at  REAL
);
CREATE INDEX outbox_pending ON outbox(chat, id) WHERE state = 'pending';
CREATE INDEX outbox_turn ON outbox(turn_id) WHERE turn_id IS NOT NULL;
