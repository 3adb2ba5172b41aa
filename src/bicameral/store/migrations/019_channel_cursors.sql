-- Where each channel that asks its platform from a position of its own stands (Matrix's sync token): written in
-- the transaction that stores the messages before it, so a restart neither replays nor loses any.
CREATE TABLE channel_cursors (
    channel    TEXT PRIMARY KEY,
    position   TEXT NOT NULL,
    updated_at REAL NOT NULL
);
