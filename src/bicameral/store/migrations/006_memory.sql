-- memory_files: every Markdown file under <data dir>/memory/ as last indexed (or why it was skipped).
CREATE TABLE memory_files (
    path        TEXT PRIMARY KEY,
    scope       TEXT NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    error       TEXT,
    indexed_at  REAL NOT NULL
);

-- memory_facts: the live entries of those files; the files are the truth, this is their index.
CREATE TABLE memory_facts (
    rowid       INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    scope       TEXT NOT NULL,
    path        TEXT NOT NULL,
    text        TEXT NOT NULL,
    key         TEXT,
    importance  REAL NOT NULL,
    at          TEXT,
    uses        INTEGER NOT NULL DEFAULT 0,
    last_used   REAL
);
CREATE INDEX memory_facts_scope ON memory_facts(scope, importance);
CREATE INDEX memory_facts_path ON memory_facts(path);

-- memory_fts: full-text search over memory_facts.text (rowid = memory_facts.rowid).
CREATE VIRTUAL TABLE memory_fts USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2');
