"""Memory: remember, recall and forget facts in the memory files, with the index following the files.

The files are the truth. Before every read the index is brought up to date with them (a file whose
mtime or size changed is indexed again, a removed file dropped), so edits a person makes with any
editor while the assistant runs are seen on the next read. Every write reads the file first and
changes only the lines concerned.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from bicameral.redaction import scrub, scrub_obj
from bicameral.store.memory_files import (
    DEFAULT_IMPORTANCE,
    BrokenMemoryFile,
    Entry,
    MemoryFile,
    edit,
    inside,
    markdown_files,
    new_file,
    parse,
    path_for_scope,
    read_file,
    retire,
    scope_for_path,
    write_file,
)
from bicameral.store.memory_index import Fact, MemoryIndex, meaningful_words
from bicameral.store.sql import SqlDatabase
from bicameral.text import normalize

log = logging.getLogger(__name__)

MAX_FACT_CHARS = 1000
FORGOTTEN = "[forgotten]"
T = TypeVar("T")
COMMITTED = "@committed/"  # index keys of files in the read-only committed folder
_CANDIDATES = 50
_FORGET_LIMIT = 20


@dataclass(frozen=True)
class Remembered:
    fact: Fact
    outcome: str  # "new", "repeat" or "replaced"
    replaced: Fact | None = None


@dataclass(frozen=True)
class Stats:
    counts: dict[str, int]
    broken: list[tuple[str, str]]


class Memory:
    """The memory of one data dir: its files under `root`, their index in the database."""

    def __init__(
        self,
        db: SqlDatabase,
        root: Path,
        *,
        committed: Path | None = None,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.root = Path(root)
        # A read-only folder kept in the owner's own repository: searched like the rest, never written.
        self.committed = Path(committed) if committed is not None else None
        self.index = MemoryIndex(db)
        self._clock = clock
        self.timer = timer  # what lookups are timed with
        # Unknown until the first lookup is timed: assume it is slow, so it never stalls the caller's loop.
        self.last_lookup_seconds = math.inf

    # --- keeping the index in step with the files ---

    def sync(self) -> None:
        """Index every file that changed since it was last indexed; drop files that are gone."""
        known = self.index.file_states()
        seen: set[str] = set()
        roots = [(self.root, "")] + ([(self.committed, COMMITTED)] if self.committed is not None else [])
        for root, prefix in roots:
            for found in markdown_files(root):
                key = prefix + found.rel
                seen.add(key)
                state = known.get(key)
                if state is not None and state.mtime_ns == found.mtime_ns and state.size == found.size:
                    continue
                self._index_file(key, found.mtime_ns, found.size)
        for gone in set(known) - seen:
            self.index.drop_file(gone)

    def _file(self, key: str) -> Path:
        """The file behind an index key: `@committed/...` lies in the committed folder, the rest in the root."""
        if key.startswith(COMMITTED) and self.committed is not None:
            return self.committed / key.removeprefix(COMMITTED)
        return self.root / key

    def _index_file(self, key: str, mtime_ns: int, size: int) -> None:
        scope = scope_for_path(Path(key.removeprefix(COMMITTED)))
        try:
            parsed = read_file(self._file(key), scope, key)
        except (BrokenMemoryFile, OSError) as exc:
            log.warning("memory file %s skipped: %s", key, exc)
            self.index.replace_file(key, scope, mtime_ns, size, (), self._clock(), error=str(exc))
            return
        if parsed.repaired:
            shown = ", ".join(map(str, parsed.repaired[:10])) + (" …" if len(parsed.repaired) > 10 else "")
            log.warning(
                "memory file %s: line %s held NUL bytes, control codes or bytes that are not UTF-8; "
                "read without them, the rest of the file as usual", key, shown,
            )
        skipped = self.index.replace_file(key, scope, mtime_ns, size, parsed.entries, self._clock())
        if skipped:
            log.warning("memory file %s repeats ids used elsewhere, skipped: %s", key, ", ".join(skipped))

    # --- reading ---

    def search(self, text: str, scopes: Sequence[str], limit: int = 10) -> list[Fact]:
        """Entries matching the words, best match first, then by importance, recency and use."""
        self.sync()
        return self._search(text, scopes, limit)

    def recall(self, text: str, scopes: Sequence[str], limit: int = 10) -> list[Fact]:
        """What the recall tool answers: matches first, then (with no words) the most important."""
        self.sync()
        facts = self._search(text, scopes, limit) if text.strip() else self._important(scopes, limit)
        self.index.mark_used([f.id for f in facts], self._clock())
        return facts

    def important(self, scopes: Sequence[str], limit: int) -> list[Fact]:
        self.sync()
        return self._important(scopes, limit)

    def relevant(self, text: str, scopes: Sequence[str], budget_tokens: int) -> list[Fact]:
        """What goes into a prompt: facts matching the text, then the most important, within a token budget."""
        if budget_tokens <= 0 or not scopes:
            return []
        started = self.timer()
        try:
            return self._relevant(text, scopes, budget_tokens)
        finally:
            self.last_lookup_seconds = self.timer() - started

    def _relevant(self, text: str, scopes: Sequence[str], budget_tokens: int) -> list[Fact]:
        self.sync()
        matched = self._search(text, scopes, _CANDIDATES)
        chosen: dict[str, Fact] = {}
        spent = 0
        for fact in [*matched, *self._important(scopes, _CANDIDATES)]:
            cost = tokens(fact.text)
            if fact.id in chosen or spent + cost > budget_tokens:
                continue
            chosen[fact.id] = fact
            spent += cost
        matched_ids = {f.id for f in matched}
        self.index.mark_used([i for i in chosen if i in matched_ids], self._clock())
        return list(chosen.values())

    def _search(self, text: str, scopes: Sequence[str], limit: int) -> list[Fact]:
        found = self.index.search(text, scopes, _CANDIDATES)
        now = self._clock()
        # Best match first (bm25: lower is better); importance, recency and use break ties.
        found.sort(key=lambda f: (round(f.rank, 6), -weight(f, now)))
        return found[:limit]

    def _important(self, scopes: Sequence[str], limit: int) -> list[Fact]:
        now = self._clock()
        return sorted(self.index.top(scopes, max(limit, _CANDIDATES)), key=lambda f: -weight(f, now))[:limit]

    def all(self, scopes: Sequence[str], limit: int = 200) -> list[Fact]:
        return self.important(scopes, limit)

    def stats(self, scopes: Sequence[str]) -> Stats:
        self.sync()
        return Stats(self.index.counts(scopes), self.index.broken_files())

    # --- writing ---

    def remember(
        self,
        scope: str,
        text: str,
        *,
        importance: float = DEFAULT_IMPORTANCE,
        key: str | None = None,
        replaces: str | None = None,
    ) -> Remembered:
        """Keep a fact in the scope's file. A repeat is not added twice; a fact with the same key (or the
        one named in `replaces`) is replaced, the old one kept under History."""
        # A pasted credential is never kept, nor a control code or lone surrogate, whoever the caller.
        text = " ".join(scrub(normalize(text, compose=False).text).split())
        if not text:
            raise ValueError("there is nothing to remember in an empty text")
        if len(text) > MAX_FACT_CHARS:
            raise ValueError(f"a fact is at most {MAX_FACT_CHARS} characters; this one has {len(text)}: split it")
        importance = min(1.0, max(0.0, importance))
        key = "_".join(key.casefold().replace("=", "").split()) if key else None
        self.sync()
        path, file = self._load(scope)
        same = next((e for e in file.entries if _normal(e.text) == _normal(text)), None)
        if same is not None:
            if importance > same.importance:
                self._write(path, edit(file, remove={same.id}, add=[replace(same, span=None, importance=importance)]))
            return Remembered(self._fact(same.id), "repeat")
        old = next((e for e in file.entries if (replaces and e.id == replaces) or (key and e.key == key)), None)
        if replaces and old is None:
            raise ValueError(f"there is no fact {replaces!r} here to replace; recall it first to see its id")
        now = datetime.fromtimestamp(self._clock(), UTC)
        entry = Entry(id="m" + secrets.token_hex(4), text=text, importance=importance, key=key or (old.key if old else None),
                      at=now.strftime("%Y-%m-%dT%H:%MZ"))
        if old is None:
            self._write(path, edit(file, add=[entry]))
            return Remembered(self._fact(entry.id), "new")
        previous = self._fact(old.id)
        note = f"replaced by {entry.id} on {now:%Y-%m-%d}"
        self._write(path, edit(file, remove={old.id}, add=[entry], retired=[retire(old, note)]))
        return Remembered(self._fact(entry.id), "replaced", previous)

    def forget(self, what: str, scopes: Sequence[str]) -> list[Fact]:
        """Delete by id, or every entry containing all the words; from the file (history too) and the index."""
        self.sync()
        what = what.strip()
        fact = self.index.get(what)
        if fact is not None:
            targets = [fact] if fact.scope in scopes else []
        else:
            targets = [f for f in self._search(what, scopes, _CANDIDATES) if _has_all_words(f.text, what)][:_FORGET_LIMIT]
        if any(t.path.startswith(COMMITTED) for t in targets):
            log.info("forget %r: facts in the committed memory folder are read-only and stay", what)
            targets = [t for t in targets if not t.path.startswith(COMMITTED)]
        by_path: dict[str, list[Fact]] = {}
        for target in targets:
            by_path.setdefault(target.path, []).append(target)
        for rel, facts in by_path.items():
            path = self.root / rel
            file = read_file(path, facts[0].scope, rel)
            ids = {f.id for f in facts}
            # The old versions of a forgotten fact go too: forgetting must not leave it in History.
            ids |= {h.id for h in file.history if any(f.id in (h.note or "") for f in facts)}
            ids |= {h.id for h in file.history if _has_all_words(h.text, what) and fact is None}
            self._write(path, edit(file, remove=ids))
        return targets

    # --- helpers ---

    def _load(self, scope: str) -> tuple[Path, MemoryFile]:
        path = path_for_scope(self.root, scope)
        rel = path.relative_to(self.root).as_posix()
        if path.exists() or path.is_symlink():
            if not inside(self.root, path):
                raise ValueError(f"the memory file {rel} is a symlink or lies outside the memory folder; not touching it")
            try:
                return path, read_file(path, scope, rel)
            except BrokenMemoryFile as exc:
                raise ValueError(f"the memory file {rel} cannot be read ({exc}); fix or move it, I won't overwrite it") from None
        return path, parse(scope, new_file(scope, datetime.fromtimestamp(self._clock(), UTC)), rel)

    def _write(self, path: Path, content: str) -> None:
        write_file(self.root, path, content)
        stat = path.stat()
        self._index_file(path.relative_to(self.root).as_posix(), stat.st_mtime_ns, stat.st_size)

    def _fact(self, fact_id: str) -> Fact:
        fact = self.index.get(fact_id)
        if fact is None:  # pragma: no cover - a write is always indexed right after
            raise RuntimeError(f"fact {fact_id} was written but is not indexed")
        return fact


def weight(fact: Fact, now: float) -> float:
    """Importance, nudged up by use and recent use (the stored importance counts most)."""
    last = fact.last_used or _parse_at(fact.at) or now
    recency = 1.0 / (1.0 + max(0.0, now - last) / (30 * 86400))
    return fact.importance * (0.7 + 0.3 * recency) + 0.1 * min(1.0, math.log1p(fact.uses) / 3)


def tokens(text: str) -> int:
    """A rough token count (about four characters each) for budgeting prompt space."""
    return len(text) // 4 + 8


def _parse_at(at: str | None) -> float | None:
    if not at:
        return None
    try:
        return datetime.strptime(at, "%Y-%m-%dT%H:%MZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def _has_all_words(text: str, words: str) -> bool:
    wanted = set(meaningful_words(words))
    have = set(_normal(text).split())
    return bool(wanted) and wanted <= have


__all__ = ["Fact", "Memory", "Remembered", "Stats"]


def blank_forgotten(obj: T, texts: Sequence[str]) -> T:
    """A copy of a JSON-like transcript with every forgotten fact's text blanked out, so it cannot be read back."""

    def blank(value: str) -> str:
        for text in texts:
            if text:
                value = value.replace(text, FORGOTTEN)
        return value

    cleaned: T = scrub_obj(obj, blank)
    return cleaned
