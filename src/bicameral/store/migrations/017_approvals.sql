-- Tool calls waiting for the owner's approval (issue 27): a call whose tool the owner listed in plugins.json's
-- `ask_before`, or one that acts outside after its run read untrusted content. `token` is random and is all a button
-- carries (`a:<token>:1` approve, `a:<token>:0` deny); `owner_chat` is where the owner was asked and `message_id`
-- the asking message there (only a press on it counts). `call` is a digest of the tool's name and arguments: after a
-- restart, the turn asking for the same call again waits on this row instead of asking twice. Deciding is one UPDATE
-- from 'open', so of two presses only one wins; `late` marks a decision made when nothing waited for it (after a
-- restart), kept for the run that asks the same again.
CREATE TABLE approvals (
    token       TEXT PRIMARY KEY,
    chat        TEXT NOT NULL,
    owner_chat  TEXT NOT NULL,
    message_id  TEXT,
    tool        TEXT NOT NULL,
    call        TEXT NOT NULL,
    summary     TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'approved', 'denied', 'expired')),
    late        INTEGER NOT NULL DEFAULT 0,
    asked_at    REAL NOT NULL,
    deadline    REAL NOT NULL,
    closed_at   REAL
);
CREATE INDEX approvals_chat ON approvals(chat, state);
