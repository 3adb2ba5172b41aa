"""The memory index: full-text search over the entries of the memory files (SQLite FTS5, or PostgreSQL's own in
`memory_fulltext`), with use counts for importance."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bicameral.store import memory_fulltext
from bicameral.store.memory_files import Entry
from bicameral.store.sql import Connection, DataError, IntegrityError, InterfaceError, Row, SqlDatabase

log = logging.getLogger(__name__)

_WORD = re.compile(r"\w+", re.UNICODE)
# Words that match nearly everything and say nothing about which fact is meant.
_STOP = frozenset(
    "a an and are as at be but by do does did for from had has have he her hers him his how i i'm im in is it its "
    "me my mine no not of on or our she so that the their them they this to us was we were what when where which "
    "who why will with you your yours about can could would should there here then than just also please".split()
)
_MAX_TERMS = 24


@dataclass(frozen=True)
class Fact:
    """An indexed entry with where it lives and how often it was used."""

    id: str
    scope: str
    path: str
    text: str
    importance: float
    key: str | None
    at: str | None
    uses: int
    last_used: float | None
    rank: float = 0.0  # bm25 of a search, or -ts_rank on PostgreSQL (lower is better); 0 when not searched


@dataclass(frozen=True)
class FileState:
    mtime_ns: int
    size: int
    error: str | None


def meaningful_words(text: str) -> list[str]:
    """The words of free text that can tell facts apart, lowercased, in order, once each."""
    terms: list[str] = []
    for word in _WORD.findall(text.casefold()):
        if len(word) < 2 or word in _STOP or word in terms:
            continue
        terms.append(word)
    return terms


def match_expression(text: str) -> str | None:
    """An FTS5 query for any meaningful word of free text (each quoted, so no syntax leaks in)."""
    terms = meaningful_words(text)
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms[:_MAX_TERMS])


class MemoryIndex:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db
        # PostgreSQL's migrations leave out the FTS5 table: its own full-text table is made here.
        self._pg_config = memory_fulltext.ensure_table(db) if db.engine == "postgresql" else None

    def file_states(self) -> dict[str, FileState]:
        rows = self._db.query("SELECT path, mtime_ns, size, error FROM memory_files")
        return {r["path"]: FileState(r["mtime_ns"], r["size"], r["error"]) for r in rows}

    def replace_file(
        self, path: str, scope: str, mtime_ns: int, size: int, entries: Sequence[Entry], now: float, error: str | None = None
    ) -> list[str]:
        """Index a file's entries in place of what it held before; returns ids skipped as duplicates."""
        skipped: list[str] = []
        with self._db.tx() as conn:
            used = {
                r["id"]: (r["uses"], r["last_used"])
                for r in conn.execute("SELECT id, uses, last_used FROM memory_facts WHERE path = ?", (path,))
            }
            _delete_facts(conn, "path = ?", (path,))
            for entry in entries:
                taken = conn.execute("SELECT 1 FROM memory_facts WHERE id = ?", (entry.id,)).fetchone()
                if taken:
                    skipped.append(entry.id)
                    continue
                uses, last_used = used.get(entry.id, (0, None))
                try:
                    # Its own savepoint: an entry the index cannot take costs only itself, never the file.
                    with self._db.tx():
                        cursor = conn.execute(
                            """INSERT INTO memory_facts (id, scope, path, text, key, importance, at, uses, last_used)
                               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING rowid""",
                            (entry.id, scope, path, entry.text, entry.key, entry.importance, entry.at, uses, last_used),
                        )
                        rowid = cursor.fetchone()[0]
                        conn.execute("INSERT INTO memory_fts (rowid, text) VALUES (?, ?)", (rowid, entry.text))
                except (IntegrityError, InterfaceError, DataError, ValueError) as exc:
                    log.warning("memory file %s: entry %s not indexed: %s", path, entry.id[:40], exc)
            conn.execute(
                """INSERT INTO memory_files (path, scope, mtime_ns, size, error, indexed_at) VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT(path) DO UPDATE SET scope = excluded.scope, mtime_ns = excluded.mtime_ns,
                   size = excluded.size, error = excluded.error, indexed_at = excluded.indexed_at""",
                (path, scope, mtime_ns, size, error, now),
            )
        return skipped

    def drop_file(self, path: str) -> None:
        with self._db.tx() as conn:
            _delete_facts(conn, "path = ?", (path,))
            conn.execute("DELETE FROM memory_files WHERE path = ?", (path,))

    def search(self, text: str, scopes: Sequence[str], limit: int) -> list[Fact]:
        """Entries in the scopes that match any meaningful word of the text, best match first."""
        expression = match_expression(text)
        if expression is None or not scopes:
            return []
        if self._pg_config is not None:
            found = memory_fulltext.search(self._db, self._pg_config, meaningful_words(text)[:_MAX_TERMS], scopes, limit)
            return [_fact(r) for r in found]
        marks = ",".join("?" * len(scopes))
        rows = self._db.query(
            f"""SELECT f.*, bm25(memory_fts) AS rank FROM memory_fts JOIN memory_facts f ON f.rowid = memory_fts.rowid
                WHERE memory_fts MATCH ? AND f.scope IN ({marks}) ORDER BY rank LIMIT ?""",
            (expression, *scopes, limit),
        )
        return [_fact(r) for r in rows]

    def top(self, scopes: Sequence[str], limit: int) -> list[Fact]:
        """The most important entries of the scopes."""
        if not scopes:
            return []
        marks = ",".join("?" * len(scopes))
        rows = self._db.query(
            f"""SELECT *, 0.0 AS rank FROM memory_facts WHERE scope IN ({marks})
                ORDER BY importance DESC, uses DESC, rowid DESC LIMIT ?""",
            (*scopes, limit),
        )
        return [_fact(r) for r in rows]

    def get(self, fact_id: str) -> Fact | None:
        row = self._db.query_one("SELECT *, 0.0 AS rank FROM memory_facts WHERE id = ?", (fact_id,))
        return _fact(row) if row else None

    def mark_used(self, ids: Iterable[str], now: float) -> None:
        ids = list(ids)
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self._db.tx() as conn:
            conn.execute(f"UPDATE memory_facts SET uses = uses + 1, last_used = ? WHERE id IN ({marks})", (now, *ids))

    def counts(self, scopes: Sequence[str]) -> dict[str, int]:
        if not scopes:
            return {}
        marks = ",".join("?" * len(scopes))
        rows = self._db.query(
            f"SELECT scope, COUNT(*) AS n FROM memory_facts WHERE scope IN ({marks}) GROUP BY scope", tuple(scopes)
        )
        return {r["scope"]: r["n"] for r in rows}

    def broken_files(self) -> list[tuple[str, str]]:
        rows = self._db.query("SELECT path, error FROM memory_files WHERE error IS NOT NULL ORDER BY path")
        return [(r["path"], r["error"]) for r in rows]


def _delete_facts(conn: Connection, where: str, params: tuple[str, ...]) -> None:
    conn.execute(f"DELETE FROM memory_fts WHERE rowid IN (SELECT rowid FROM memory_facts WHERE {where})", params)
    conn.execute(f"DELETE FROM memory_facts WHERE {where}", params)


def _fact(row: Row) -> Fact:
    return Fact(
        id=row["id"],
        scope=row["scope"],
        path=row["path"],
        text=row["text"],
        importance=row["importance"],
        key=row["key"],
        at=row["at"],
        uses=row["uses"],
        last_used=row["last_used"],
        rank=row["rank"],
    )
