-- Pairing codes the owner issued with /pair: only a hash of each code is kept, never the code, with when it stops
-- working and who used it (a code works once).
CREATE TABLE pairing_codes (
    code_hash  TEXT PRIMARY KEY,
    issued_by  TEXT NOT NULL,
    issued_at  REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_by    TEXT,
    used_at    REAL
);
-- Wrong codes, by sender (never what they guessed): a stranger gets a few tries in a window, then is not heard.
CREATE TABLE pairing_misses (
    sender TEXT NOT NULL,
    at     REAL NOT NULL
);
CREATE INDEX pairing_misses_by_sender ON pairing_misses (sender, at);
