"""Restoring a backup: checked whole (every file's size and sha256, nothing added, the same instance) before anything
is touched, then the data dir's content moved aside and the backup's put in its place, with no assistant running."""

from __future__ import annotations

import os
import shutil
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bicameral.backup.lock import LOCK_NAME, exclusive, instance_id
from bicameral.backup.manifest import MANIFEST_NAME, BackupError, Manifest, file_hash, read_manifest, safe_relative
from bicameral.backup.pg_dump import DUMP_NAME, check_empty, load_dump

MAX_MANIFEST_BYTES = 64 << 20


@dataclass(frozen=True)
class Restored:
    manifest: Manifest
    aside: Path | None  # where the data dir's previous content went (None: it held nothing)


def restore_backup(
    data_dir: Path, source: Path, now: float, *, keep: tuple[Path, ...] = (), database_url: str | None = None
) -> Restored:
    """Replace the data dir's content with the backup at `source`; `keep` are folders inside it left where they are.
    With `database_url` (PostgreSQL) the backup's dump is loaded into that database, which must be empty."""
    if not source.exists():
        raise BackupError(f"there is no backup at {source}")
    with exclusive(data_dir):
        staging = data_dir.parent / f".{data_dir.name}.restoring-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            folder = source
            if source.is_file():
                staging.mkdir()
                _untar(source, staging)
                folder = staging
            manifest = _verified(folder, source)
            ours = instance_id(data_dir, create=False)
            if ours is not None and ours != manifest.instance_id:
                raise BackupError(
                    f"{source} is a backup of another instance ({manifest.instance_id}, this data dir is {ours}): "
                    f"to restore it anyway, move {data_dir} away and restore into an empty data dir"
                )
            _check_database(manifest, source, database_url)
            aside = _move_aside(data_dir, now, keep)
            for entry in manifest.files:
                target = data_dir / entry.path
                target.parent.mkdir(parents=True, exist_ok=True)
                if folder is staging:
                    (folder / entry.path).rename(target)
                else:
                    shutil.copy2(folder / entry.path, target)
            if manifest.database == "postgresql" and database_url is not None:
                _load(database_url, data_dir / DUMP_NAME)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Restored(manifest, aside)


def _check_database(manifest: Manifest, source: Path, database_url: str | None) -> None:
    """The backup's database must go where this install keeps its own: refused before anything moves."""
    if manifest.database == "postgresql" and database_url is None:
        raise BackupError(
            f"{source} holds a PostgreSQL dump ({DUMP_NAME}): set BICAMERAL_DATABASE_URL to a new, empty database "
            "to restore it"
        )
    if manifest.database == "postgresql" and database_url is not None:
        check_empty(database_url)
    if manifest.database == "sqlite" and database_url is not None and any(e.path == "bicameral.db" for e in manifest.files):
        raise BackupError(
            f"{source} holds a SQLite database but BICAMERAL_DATABASE_URL is set: unset it to restore this backup, "
            "then move the data to PostgreSQL with `bicameral migrate-db`"
        )


def _load(database_url: str, dump: Path) -> None:
    try:
        load_dump(database_url, dump)
    except BackupError as exc:
        raise BackupError(
            f"the backup's files are restored but its database is not: {exc}. The dump is kept at {dump}; load it "
            "with `pg_restore --no-owner --single-transaction --dbname <URL> " + str(dump) + "` into an empty database"
        ) from None
    dump.unlink()  # loaded: the database holds it now, and a dump left here would only go stale


def _untar(source: Path, staging: Path) -> None:
    """Only regular files with plain relative names come out of the tar; anything else means it is not ours."""
    try:
        with tarfile.open(source, "r:*") as tar:
            for member in tar:
                if not member.isfile() or not safe_relative(member.name):
                    raise BackupError(f"{source} is damaged or not a backup: it holds {member.name!r}")
                if member.name == MANIFEST_NAME and member.size > MAX_MANIFEST_BYTES:
                    raise BackupError(f"{source} is damaged: its manifest is {member.size} bytes")
                target = staging / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                reading = tar.extractfile(member)
                assert reading is not None
                with reading, target.open("wb") as writing:
                    shutil.copyfileobj(reading, writing)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BackupError(f"{source} is damaged or not a backup ({exc})") from None


def _verified(folder: Path, source: Path) -> Manifest:
    path = folder / MANIFEST_NAME
    if not path.is_file():
        raise BackupError(f"{source} is not a backup: it has no {MANIFEST_NAME}")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise BackupError(f"{source} is damaged: its manifest is {path.stat().st_size} bytes")
    manifest = read_manifest(path.read_text(encoding="utf-8", errors="replace"), source)
    listed = {entry.path for entry in manifest.files}
    for entry in manifest.files:
        file = folder / entry.path
        if file.is_symlink() or not file.is_file():
            raise BackupError(f"{source} is damaged: {entry.path} is missing")
        if file_hash(file) != (entry.size, entry.sha256):
            raise BackupError(f"{source} is damaged: {entry.path} does not match its checksum")
    for root, _dirs, files in os.walk(folder):
        for name in files:
            rel = (Path(root) / name).relative_to(folder).as_posix()
            if rel != MANIFEST_NAME and rel not in listed:
                raise BackupError(f"{source} is damaged: it holds {rel}, which its manifest does not list")
    return manifest


def _move_aside(data_dir: Path, now: float, keep: tuple[Path, ...]) -> Path | None:
    """Everything the data dir holds but the lock (held now) and `keep`, moved to a sibling folder named for now."""
    kept = {path.resolve() for path in keep}
    moving = [p for p in sorted(data_dir.iterdir()) if p.name != LOCK_NAME and p.resolve() not in kept]
    if not moving:
        return None
    base = f"{data_dir.name}.before-restore-{datetime.fromtimestamp(now, UTC):%Y%m%d-%H%M%S}"
    aside, n = data_dir.parent / base, 1
    while aside.exists():
        n += 1
        aside = data_dir.parent / f"{base}-{n}"
    aside.mkdir()
    for path in moving:
        path.rename(aside / path.name)
    return aside
