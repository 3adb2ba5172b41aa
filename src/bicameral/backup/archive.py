"""Making a backup: the database copied by SQLite's online backup API while the assistant may be writing, the data
dir's files beside it, a manifest last; as a directory or a tar file; the nightly ones pruned to the newest few."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bicameral.backup.lock import HEARTBEAT_NAME, HEARTBEATS_DIR, LOCK_NAME, instance_id
from bicameral.backup.manifest import MANIFEST_NAME, BackupError, Entry, Manifest, copy_hashed, file_hash
from bicameral.backup.pg_dump import DUMP_NAME, dump_database

DB_NAME = "bicameral.db"
RECORD_NAME = "last_backup.json"
# Not backed up: the database's own files (its copy is made through SQLite), space held for it, logs, caches, the
# Claude Code CLI's homes and captures (tokens among them), copies of files still to send, the lock, the heartbeats
# and this record.
SKIPPED = frozenset({
    DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal", ".reserve", "logs", "cc_logs", "claude_code",
    "outgoing", "plugins_tools.json", LOCK_NAME, HEARTBEAT_NAME, HEARTBEATS_DIR, RECORD_NAME, DUMP_NAME,
})
NIGHTLY_PREFIX = "bicameral-"
NIGHTLY_SUFFIX = ".tar.gz"
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")


@dataclass(frozen=True)
class BackupPlan:
    """What a backup reads: the data dir, what of it to leave out besides `SKIPPED` (a backup folder kept inside it),
    and the version written into the manifest."""

    data_dir: Path
    version: str
    left_out: tuple[Path, ...] = ()
    database_url: str | None = None  # PostgreSQL's: the database is dumped with pg_dump instead of copied


def make_backup(plan: BackupPlan, dest: Path, now: float) -> Manifest:
    """Back the data dir up into `dest` (a new directory, or a tar file when its name ends in .tar, .tar.gz or .tgz)."""
    if dest.exists() and (dest.is_file() or any(dest.iterdir())):
        raise BackupError(f"{dest} already exists: name a new file or an empty folder")
    if not plan.data_dir.is_dir():
        raise BackupError(f"there is no data dir at {plan.data_dir} to back up")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        manifest = _fill(plan, staging, now)
        if dest.name.endswith(TAR_SUFFIXES):
            _tar(staging, manifest, dest)
        else:
            if dest.exists():
                dest.rmdir()  # empty, checked above
            staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _record(plan.data_dir, dest, now)
    return manifest


def _fill(plan: BackupPlan, staging: Path, now: float) -> Manifest:
    ident = instance_id(plan.data_dir)
    assert ident is not None
    if plan.database_url is not None:
        dump_database(plan.database_url, staging / DUMP_NAME)
        entries = [Entry(DUMP_NAME, *file_hash(staging / DUMP_NAME))]
    else:
        entries = [_copy_database(plan.data_dir / DB_NAME, staging / DB_NAME)] if (plan.data_dir / DB_NAME).exists() else []
    left_out = {path.resolve() for path in plan.left_out}
    for root, dirs, files in os.walk(plan.data_dir):
        here = Path(root)
        rel_root = here.relative_to(plan.data_dir)
        dirs[:] = sorted(d for d in dirs if _kept(rel_root / d, here / d, left_out))
        for name in sorted(files):
            source = here / name
            if not _kept(rel_root / name, source, left_out) or source.is_symlink() or not source.is_file():
                continue  # a link made in a workspace could point anywhere: it is not followed
            entry = _copy_file(source, staging / rel_root / name, (rel_root / name).as_posix())
            if entry is not None:
                entries.append(entry)
    database = "sqlite" if plan.database_url is None else "postgresql"
    manifest = Manifest(plan.version, ident, now, tuple(sorted(entries, key=lambda e: e.path)), database)
    (staging / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
    return manifest


def _kept(rel: Path, path: Path, left_out: set[Path]) -> bool:
    if len(rel.parts) == 1 and rel.parts[0] in SKIPPED:
        return False
    return not path.is_symlink() and path.resolve() not in left_out


def _copy_database(source: Path, target: Path) -> Entry:
    # The online backup API copies a consistent snapshot (the WAL's commits included) while the app keeps writing.
    src = sqlite3.connect(source, timeout=30)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        finally:
            dst.close()
    finally:
        src.close()
    size, digest = file_hash(target)
    return Entry(DB_NAME, size, digest)


def _copy_file(source: Path, target: Path, rel: str) -> Entry | None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with source.open("rb") as reading, target.open("wb") as writing:
            size, digest = copy_hashed(reading, writing)
    except FileNotFoundError:
        target.unlink(missing_ok=True)
        return None  # deleted while the walk went by: not part of this backup
    return Entry(rel, size, digest)


def _tar(staging: Path, manifest: Manifest, dest: Path) -> None:
    partial = dest.with_name(f".{dest.name}.tar-{os.getpid()}")
    mode = "w" if dest.name.endswith(".tar") else "w:gz"
    try:
        with tarfile.open(partial, mode) as tar:  # type: ignore[call-overload]
            tar.add(staging / MANIFEST_NAME, arcname=MANIFEST_NAME)
            for entry in manifest.files:
                tar.add(staging / entry.path, arcname=entry.path, recursive=False)
        partial.rename(dest)
    finally:
        partial.unlink(missing_ok=True)


def _record(data_dir: Path, dest: Path, now: float) -> None:
    """Where and when the last backup went, for /audit."""
    partial = data_dir / f".{RECORD_NAME}.{os.getpid()}"
    partial.write_text(json.dumps({"at": now, "path": str(dest.resolve())}), encoding="utf-8")
    partial.replace(data_dir / RECORD_NAME)


def last_backup(data_dir: Path) -> float | None:
    """When the last backup of this data dir was made, if one was."""
    try:
        return float(json.loads((data_dir / RECORD_NAME).read_text(encoding="utf-8"))["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def nightly_name(now: float) -> str:
    return f"{NIGHTLY_PREFIX}{datetime.fromtimestamp(now, UTC):%Y%m%d-%H%M%S}{NIGHTLY_SUFFIX}"


def prune_backups(folder: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` nightly backups in `folder` (only those named as the nightly ones are)."""
    found = sorted(
        path for path in folder.glob(f"{NIGHTLY_PREFIX}*{NIGHTLY_SUFFIX}") if path.is_file() and not path.is_symlink()
    )
    gone = found[: max(len(found) - keep, 0)]
    for path in gone:
        path.unlink(missing_ok=True)
    return gone
