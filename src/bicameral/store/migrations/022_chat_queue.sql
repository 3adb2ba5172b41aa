-- Chats with work waiting for a worker: the serving worker adds a row per message it accepted, any worker takes the
-- rows of the chats it can lease (FOR UPDATE SKIP LOCKED, so workers never wait on each other's rows).
CREATE TABLE chat_queue (
    id      INTEGER PRIMARY KEY,
    chat    TEXT NOT NULL,
    channel TEXT NOT NULL
);
CREATE INDEX chat_queue_chat ON chat_queue(chat);
