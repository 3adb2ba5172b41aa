-- Spending caps (issue 27). Whose words caused each model call: their person keys (`channel:user-id`), sorted and
-- separated by spaces, NULL when none (a check, a call outside any turn or task). A day's spend per person is one
-- grouped SUM over `model_usage_at`; a call caused by several people counts in full for each of them.
ALTER TABLE model_usage ADD COLUMN people TEXT;
-- The owner's one message per person (or '*': everyone together) and UTC day (YYYY-MM-DD) about a cap reached, with
-- its buttons. `token` is random and is all a button carries (with the choice); answering is one UPDATE from 'open',
-- so of two presses only one wins.
CREATE TABLE cap_notices (
    token      TEXT PRIMARY KEY,
    day        TEXT NOT NULL,
    person     TEXT NOT NULL,
    chat       TEXT NOT NULL,
    message_id TEXT,
    state      TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'answered')),
    answer     TEXT,
    at         REAL NOT NULL,
    UNIQUE (day, person)
);
-- What the owner allowed over a cap for one UTC day: `extra` tokens more, or no cap at all for the rest of it.
CREATE TABLE cap_allowances (
    day       TEXT NOT NULL,
    person    TEXT NOT NULL,
    extra     INTEGER NOT NULL DEFAULT 0,
    unlimited INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, person)
);
-- Inbound messages held because a cap was reached (they stay pending in `messages`): the person was told once.
CREATE TABLE cap_holds (
    row_id INTEGER PRIMARY KEY,
    at     REAL NOT NULL
);
