-- Questions the assistant asked with `ask_user` (issue 27), kept so that a press or an answer still finds its
-- question after a restart. `token` is random and is all a button carries (with the choice's index); `askers` are
-- the person keys whose answer counts (JSON list); `choices` the buttons' labels (JSON list); `cause` the ids of the
-- messages that made the run ask (JSON list: never an answer to it, even when replayed after a restart). A question
-- is open until answered or past its deadline; closing it is one UPDATE from 'open', so of two presses only one wins.
-- `late` marks an answer that came when nothing waited for it (after a restart): a run asking the same again gets it.
CREATE TABLE questions (
    token       TEXT PRIMARY KEY,
    chat        TEXT NOT NULL,
    message_id  TEXT,
    askers      TEXT NOT NULL,
    question    TEXT NOT NULL,
    choices     TEXT NOT NULL,
    cause       TEXT NOT NULL DEFAULT '[]',
    state       TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'answered', 'expired')),
    answer      TEXT,
    answered_by TEXT,
    late        INTEGER NOT NULL DEFAULT 0,
    asked_at    REAL NOT NULL,
    deadline    REAL NOT NULL,
    closed_at   REAL
);
CREATE INDEX questions_chat ON questions(chat, state);
