-- refused_chats: one row per chat the gate refused, kept when its messages are pruned,
-- so a chat is told once and the owner's digest knows what it has not reported yet.
CREATE TABLE refused_chats (
    chat        TEXT PRIMARY KEY,
    sender_id   TEXT,
    sender_name TEXT,
    title       TEXT,
    count       INTEGER NOT NULL DEFAULT 0,
    reported    INTEGER NOT NULL DEFAULT 0,
    notified    INTEGER NOT NULL DEFAULT 0,
    first_at    REAL NOT NULL,
    last_at     REAL NOT NULL
);
INSERT INTO refused_chats (chat, sender_id, sender_name, count, reported, notified, first_at, last_at)
    SELECT chat, MAX(sender_id), MAX(sender_name), COUNT(*), COUNT(*), MAX(notified), MIN(created_at), MAX(created_at)
    FROM unauthorized_messages GROUP BY chat;
