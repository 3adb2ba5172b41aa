-- One row per model call, written when the call ends (models/metered.py): which model, in which role, for which
-- chat, the tokens it reported, how it ended (ok, cancelled, error or a ModelError kind) and, where the provider
-- reports its own price (the Claude Code CLI), that cost in USD. /usage and /cost add them up by UTC day.
CREATE TABLE model_usage (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    model TEXT NOT NULL,
    role TEXT NOT NULL,
    chat TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL,
    cost_usd REAL
);
CREATE INDEX model_usage_at ON model_usage (at);
