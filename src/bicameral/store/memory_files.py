"""Memory files: Markdown with frontmatter under `<data dir>/memory/`, one per scope, read and written safely.

A file is the source of truth for its scope. Its body lists facts as bullets; metadata rides in a
trailing HTML comment so the file reads cleanly and a hand-written bullet without one still counts.
Paragraphs that are not bullets (free-form notes) are entries too. Everything under a `## History`
heading is kept for the record and never searched.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from bicameral.folders import resolve_under
from bicameral.text import normalize

MAX_FILE_BYTES = 256 * 1024
USERS_DIR = "users"
CHATS_DIR = "chats"
GLOBAL_FILE = "global.md"
HISTORY_HEADING = "history"
DEFAULT_IMPORTANCE = 0.5

_META = re.compile(r"\s*<!--\s*(.*?)\s*-->\s*$")
_BULLET = re.compile(r"^\s*[-*]\s+(.*)$")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*?)\s*$")
_SAFE = re.compile(r"[A-Za-z0-9-]")
# What a line of text never holds: NUL and other control codes (tab and CR aside), and the bytes that were
# not UTF-8 (read as U+DC80-U+DCFF, Python's surrogateescape, so they are written back exactly as found).
_BROKEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]")
_MAX_NAME = 120


class BrokenMemoryFile(ValueError):
    """A memory file that cannot be read as one (binary, huge, bad frontmatter); it is skipped."""


@dataclass(frozen=True)
class Entry:
    """One remembered fact or note paragraph."""

    id: str
    text: str
    importance: float = DEFAULT_IMPORTANCE
    key: str | None = None
    at: str | None = None  # ISO time it was remembered, when known
    history: bool = False  # a replaced fact, kept for the record
    note: str | None = None  # why it is in history (e.g. "replaced by m123 on 2026-11-23")
    span: tuple[int, int] | None = None  # the file lines [start, end) it came from


@dataclass
class MemoryFile:
    """A parsed file: its frontmatter, its live entries and its history."""

    scope: str
    front: dict[object, object] = field(default_factory=dict)  # YAML allows any keys and values
    entries: list[Entry] = field(default_factory=list)
    history: list[Entry] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    live_end: int = 0  # where a new live entry goes: after the last one
    history_heading: int | None = None
    repaired: list[int] = field(default_factory=list)  # 1-based numbers of lines read around broken characters


# --- scope <-> path ---


def encode_name(name: str) -> str:
    """A reversible file-system-safe name: `:` becomes `~`, anything outside [A-Za-z0-9-] `_XX` hex."""
    out = []
    for ch in name:
        if ch == ":":
            out.append("~")
        elif _SAFE.fullmatch(ch):
            out.append(ch)
        else:
            out.append("".join(f"_{b:02x}" for b in ch.encode("utf-8")))
    encoded = "".join(out)
    if not encoded or len(encoded) > _MAX_NAME:
        raise ValueError(f"scope name {name[:40]!r} is empty or too long for a memory file")
    return encoded


def decode_name(stem: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(stem):
        ch = stem[i]
        if ch == "~":
            raw += b":"
        elif ch == "_" and re.fullmatch(r"[0-9a-f]{2}", stem[i + 1 : i + 3]):
            raw.append(int(stem[i + 1 : i + 3], 16))
            i += 2
        else:
            raw += ch.encode("utf-8")
        i += 1
    return raw.decode("utf-8", errors="replace")


def path_for_scope(root: Path, scope: str) -> Path:
    """The one file a scope is written to; it always lies inside the root."""
    kind, _, name = scope.partition(":")
    if kind == "global":
        rel = Path(GLOBAL_FILE)
    elif kind == "user":
        rel = Path(USERS_DIR) / f"{encode_name(name)}.md"
    elif kind == "chat":
        rel = Path(CHATS_DIR) / f"{encode_name(name)}.md"
    else:
        raise ValueError(f"unknown memory scope {scope!r}")
    return root / rel


def scope_for_path(rel: Path) -> str:
    """The scope a file under the root belongs to, from its place alone (frontmatter cannot widen it)."""
    parts = rel.parts
    if len(parts) == 2 and parts[0] == USERS_DIR:
        return f"user:{decode_name(rel.stem)}"
    if len(parts) == 2 and parts[0] == CHATS_DIR:
        return f"chat:{decode_name(rel.stem)}"
    return "global"


def inside(root: Path, path: Path) -> bool:
    """True when `path` is a regular file (not a symlink) that resolves inside `root`."""
    try:
        if path.is_symlink():
            return False
        return resolve_under(root, path) is not None
    except OSError:
        return False


@dataclass(frozen=True)
class FileStat:
    rel: str  # path under the root, with forward slashes
    mtime_ns: int
    size: int


def markdown_files(root: Path) -> list[FileStat]:
    """Every `.md` file under the root with its stat, never following a symlink (so nothing outside is seen)."""
    found: list[FileStat] = []

    def walk(folder: str, prefix: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, f"{prefix}{entry.name}/")
                elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    stat = entry.stat(follow_symlinks=False)
                    found.append(FileStat(prefix + entry.name, stat.st_mtime_ns, stat.st_size))
            except OSError:
                continue

    if root.is_dir() and not root.is_symlink():
        walk(str(root), "")
    return sorted(found, key=lambda f: f.rel)


# --- parse ---


def read_file(path: Path, scope: str, origin: str) -> MemoryFile:
    """Parse one file (`origin` is its path under the root); raises BrokenMemoryFile with a reason.

    One bad line (a NUL, bytes that are not UTF-8, a control code) must not cost the scope its other
    facts or its new ones: the entry on it is read without them (`MemoryFile.repaired` says where) and
    the line itself is written back untouched. Only a file that is mostly such lines is not text.
    """
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise BrokenMemoryFile(f"{size} bytes is over the {MAX_FILE_BYTES} byte limit")
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    parsed = parse(scope, text, origin)
    written = sum(1 for line in parsed.lines if line.strip())
    if parsed.repaired and 2 * len(parsed.repaired) > written:
        raise BrokenMemoryFile("it looks binary (most of its lines hold NUL bytes, control codes or bytes that are not UTF-8)")
    return parsed


def parse(scope: str, text: str, origin: str) -> MemoryFile:
    # Lines end at LF alone (a CR stays with its line and is written back): str.splitlines would also
    # break at form feeds, U+0085 or U+2028 inside a fact and a write would turn them into new lines.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    front, first = _frontmatter(lines)
    result = MemoryFile(scope=scope, front=front, lines=lines, live_end=first)
    result.repaired = [number + 1 for number, line in enumerate(lines) if _BROKEN.search(line)]
    in_history = False
    paragraph: list[int] = []

    def flush() -> None:
        if paragraph:
            add(" ".join(lines[i].strip() for i in paragraph), paragraph[0], paragraph[-1] + 1)
            paragraph.clear()

    def add(raw: str, start: int, end: int) -> None:
        entry = _entry(origin, raw, in_history, (start, end))
        if entry is None:
            return
        if in_history:
            result.history.append(entry)
        else:
            result.entries.append(entry)
            result.live_end = end

    for number in range(first, len(lines)):
        line = lines[number]
        heading = _HEADING.match(line)
        bullet = _BULLET.match(line)
        if heading:
            flush()
            in_history = heading.group(1).strip().lower() == HISTORY_HEADING
            if in_history and result.history_heading is None:
                result.history_heading = number
            elif not result.entries:
                result.live_end = number + 1
        elif bullet:
            flush()
            add(bullet.group(1), number, number + 1)
        elif not line.strip():
            flush()
        else:
            paragraph.append(number)
    flush()
    return result


def _frontmatter(lines: list[str]) -> tuple[dict[object, object], int]:
    """The frontmatter mapping and the index of the first body line."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            # Cleaned like an entry: a stray NUL or undecodable byte is no reason to lose the whole file.
            raw = normalize("\n".join(lines[1:i]), compose=False).text
            import yaml  # with the first memory file read, not at start

            try:
                front = yaml.safe_load(raw) if raw.strip() else {}
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" at line {mark.line + 2}" if mark is not None else ""
                raise BrokenMemoryFile(f"its frontmatter is not valid YAML{where}") from None
            if not isinstance(front, dict):
                raise BrokenMemoryFile("its frontmatter is not a mapping of `key: value` lines")
            return front, i + 1
    raise BrokenMemoryFile("its frontmatter starts with `---` but is never closed")


def _entry(origin: str, raw: str, in_history: bool, span: tuple[int, int]) -> Entry | None:
    # What a person's editor (or a bug) left in the line that is not text goes before anything reads it:
    # control codes and invisible characters, and each undecodable byte becomes U+FFFD.
    raw = normalize(raw, compose=False).text
    meta: dict[str, str] = {}
    found = _META.search(raw)
    if found:
        raw = raw[: found.start()]
        for pair in found.group(1).split():
            name, sep, value = pair.partition("=")
            if sep:
                meta[name] = value
    text = raw.strip()
    if not text:
        return None
    try:
        importance = min(1.0, max(0.0, float(meta.get("importance", DEFAULT_IMPORTANCE))))
    except ValueError:
        importance = DEFAULT_IMPORTANCE
    entry_id = meta.get("id") or stable_id(origin, text)
    note = meta.get("note", "").replace("_", " ") or None
    return Entry(entry_id, text, importance, meta.get("key"), meta.get("at"), in_history, note, span)


def stable_id(origin: str, text: str) -> str:
    """The id of an entry a person wrote without one: the same text in the same file, the same id."""
    return "h" + hashlib.sha1(f"{origin}\n{text}".encode()).hexdigest()[:8]


# --- write ---


def new_file(scope: str, now: datetime) -> str:
    """The text of a scope's file before anything is in it."""
    import yaml  # with the first memory file written, not at start

    front = {"scope": scope, "created": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return "\n".join(["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip(), "---", "", "# Memory", ""])


def edit(
    file: MemoryFile, *, remove: Collection[str] = frozenset(), add: Sequence[Entry] = (), retired: Sequence[Entry] = ()
) -> str:
    """The file's text with entries removed, live entries added and retired ones put under History.

    Only the lines concerned change, so whatever else a person wrote stays exactly as it was.
    """
    lines = list(file.lines)
    dropped: set[int] = set()
    for entry in [*file.entries, *file.history]:
        if entry.id in remove and entry.span is not None:
            dropped.update(range(*entry.span))
    inserts: dict[int, list[str]] = {}
    if add:
        inserts.setdefault(file.live_end, []).extend(render_entry(e) for e in add)
    tail: list[str] = []
    if retired:
        rendered = [render_entry(e) for e in retired]
        if file.history_heading is None:
            tail = ["", "## History", "", *rendered]
        else:
            inserts.setdefault(file.history_heading + 1, []).extend(rendered)
    out: list[str] = []
    for number in range(len(lines) + 1):
        out.extend(inserts.get(number, []))
        if number < len(lines) and number not in dropped:
            out.append(lines[number])
    while out and not out[-1].strip():
        out.pop()
    return "\n".join([*out, *tail]) + "\n"


def render_entry(entry: Entry) -> str:
    meta = [f"id={entry.id}"]
    if entry.key:
        meta.append(f"key={_token(entry.key)}")
    meta.append(f"importance={entry.importance:g}")
    if entry.at:
        meta.append(f"at={entry.at}")
    if entry.note:
        meta.append(f"note={_token(entry.note)}")
    text = " ".join(_clean(entry.text).replace("<!--", "").replace("-->", "").split())
    return f"- {text} <!-- {' '.join(meta)} -->"


def _token(value: str) -> str:
    return "_".join(_clean(value).replace("-->", "").replace("=", "").split())


def _clean(text: str) -> str:
    """Nothing written to a file holds a control code or a lone surrogate, whoever called."""
    return normalize(text, compose=False).text


def write_file(root: Path, path: Path, content: str) -> None:
    """Write atomically (a reader or editor never sees half a file), refusing any path outside the root."""
    root.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or resolve_under(root, path.parent) is None:
        raise ValueError(f"refusing to write {path}: it is outside the memory folder or a symlink")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".md")
    try:
        # surrogateescape: bytes that were not UTF-8 in lines this write did not touch go back as they were.
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def retire(entry: Entry, note: str) -> Entry:
    """The entry as it is kept in history."""
    return replace(entry, history=True, note=note, span=None)
