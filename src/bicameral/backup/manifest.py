"""A backup's `manifest.json`: its format, the version and instance that made it, when, and each file's size and sha256."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from bicameral.errors import BicameralError

FORMAT = 1
MANIFEST_NAME = "manifest.json"
CHUNK = 1 << 20
DATABASES = ("sqlite", "postgresql")


class BackupError(BicameralError):
    """A backup that cannot be made or restored; the message says why and what to do."""


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the data dir, with `/`
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    version: str
    instance_id: str
    created_at: float
    files: tuple[Entry, ...]
    # Where the database is in it: "sqlite" (bicameral.db, when the data dir had one) or "postgresql" (a pg_dump).
    database: str = "sqlite"

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "version": self.version,
                "instance_id": self.instance_id,
                "created_at": self.created_at,
                "database": self.database,
                "files": [{"path": e.path, "size": e.size, "sha256": e.sha256} for e in self.files],
            },
            indent=1,
        )

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.files)


def read_manifest(text: str, where: object) -> Manifest:
    """The manifest, or a BackupError: a backup without a readable one is damaged."""
    try:
        raw: Any = json.loads(text)
        if raw.get("format") != FORMAT:
            raise BackupError(f"{where} is a backup of format {raw.get('format')!r}; this version reads format {FORMAT}")
        files = tuple(Entry(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in raw["files"])
        database = str(raw.get("database", "sqlite"))  # backups made before PostgreSQL have none: SQLite's
        if database not in DATABASES:
            raise BackupError(f"{where} holds a database of an unknown kind ({database[:40]!r})")
        manifest = Manifest(str(raw["version"]), str(raw["instance_id"]), float(raw["created_at"]), files, database)
    except BackupError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise BackupError(f"{where} is damaged: its {MANIFEST_NAME} cannot be read ({exc})") from None
    for entry in files:
        if not safe_relative(entry.path):
            raise BackupError(f"{where} is damaged: its manifest names a file outside the data dir ({entry.path!r})")
    return manifest


def safe_relative(name: str) -> bool:
    """A plain relative path: no absolute path, no `..`, no empty or `.` parts."""
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and all(part not in ("", ".", "..") for part in path.parts) and "\\" not in name


def copy_hashed(source: IO[bytes], target: IO[bytes]) -> tuple[int, str]:
    """Copy one file's bytes, returning their size and sha256."""
    digest = hashlib.sha256()
    size = 0
    while chunk := source.read(CHUNK):
        digest.update(chunk)
        target.write(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def file_hash(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()
