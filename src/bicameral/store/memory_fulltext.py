"""The memory index's full-text search on PostgreSQL: its own `memory_fts` table with a tsvector and a GIN index.

SQLite's migrations make `memory_fts` an FTS5 table, which PostgreSQL's migrations skip. Here PostgreSQL gets a
plain table of the same columns (so the index writes it with the same statements) plus a `tsvector` generated from
the text with the 'english' configuration (stemming as FTS5's porter tokenizer does; 'simple' where a server has
no 'english'), searched with `ts_match_vq` (the function behind `@@`, which the stores' SQLite dialect can say)
and ranked by `ts_rank`, negated so that lower is better, as bm25 is.
"""

from __future__ import annotations

from collections.abc import Sequence

from bicameral.store.sql import Row, SqlDatabase

_CONFIGS = ("english", "simple")  # the first the server has; only these names are ever put into SQL
_LOCK = 0x6D656D66  # "memf": two workers starting at once create the table one after the other


def ensure_table(db: SqlDatabase) -> str:
    """Create `memory_fts` (if missing) on the database's own server; returns the text search configuration."""
    import psycopg  # only PostgreSQL gets here

    url: str = getattr(db, "url")  # noqa: B009  PostgresDatabase's, not part of the engine-neutral protocol
    # Its own short connection: this DDL is PostgreSQL's, which the stores' translated statements cannot say.
    with psycopg.connect(url, autocommit=False, connect_timeout=10) as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        found = {row[0] for row in conn.execute("SELECT cfgname FROM pg_ts_config WHERE cfgname = ANY(%s)", (list(_CONFIGS),))}
        config = next(name for name in _CONFIGS if name in found)
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS memory_fts (
                    rowid BIGINT PRIMARY KEY,
                    text TEXT NOT NULL,
                    tsv tsvector GENERATED ALWAYS AS (to_tsvector('{config}'::regconfig, text)) STORED)"""
        )
        conn.execute("CREATE INDEX IF NOT EXISTS memory_fts_tsv ON memory_fts USING GIN (tsv)")
        row = conn.execute(
            "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a "
            "ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
            "WHERE d.adrelid = 'memory_fts'::regclass AND a.attname = 'tsv'"
        ).fetchone()
    # A table made earlier keeps the configuration it was made with: the queries must stem as it did.
    made_with = str(row[0]) if row else ""
    return next((name for name in _CONFIGS if f"'{name}'" in made_with), config)


def query_text(terms: Sequence[str]) -> str | None:
    """A tsquery for any of the words, each quoted as one lexeme (words are \\w+, so no quote can be in one)."""
    quoted = [f"'{term}'" for term in terms if "'" not in term and "\\" not in term]
    return " | ".join(quoted) if quoted else None


def search(db: SqlDatabase, config: str, terms: Sequence[str], scopes: Sequence[str], limit: int) -> Sequence[Row]:
    """Rows of memory_facts in the scopes matching any term, best first, with `rank` (lower is better)."""
    text = query_text(terms)
    if text is None or config not in _CONFIGS:
        return []
    marks = ",".join("?" * len(scopes))
    return db.query(
        f"""SELECT f.*, -ts_rank(m.tsv, q.query) AS rank
            FROM memory_fts m JOIN memory_facts f ON f.rowid = m.rowid
            CROSS JOIN (SELECT to_tsquery('{config}', ?) AS query) q
            WHERE ts_match_vq(m.tsv, q.query) AND f.scope IN ({marks}) ORDER BY rank, f.rowid LIMIT ?""",
        (text, *scopes, limit),
    )
