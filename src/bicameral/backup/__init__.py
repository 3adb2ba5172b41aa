"""Backups of the data dir: the database (SQLite's online backup API, or pg_dump for PostgreSQL), the files beside it,
a checksummed manifest."""

from bicameral.backup.archive import BackupPlan, last_backup, make_backup, prune_backups
from bicameral.backup.lock import RunningLock, beat, is_running, last_beat
from bicameral.backup.manifest import BackupError, Manifest
from bicameral.backup.restore import restore_backup

__all__ = [
    "BackupError",
    "BackupPlan",
    "Manifest",
    "RunningLock",
    "beat",
    "is_running",
    "last_backup",
    "last_beat",
    "make_backup",
    "prune_backups",
    "restore_backup",
]
