-- Which worker runs a chat's turns now, until when, and the lease's number: a worker that lost its lease (paused past
-- its deadline, another took over) finds its number gone when it comes to commit a result, and the result is dropped.
CREATE TABLE chat_leases (
    chat     TEXT PRIMARY KEY,
    worker   TEXT NOT NULL,
    epoch    INTEGER NOT NULL,
    deadline REAL NOT NULL
);
