"""Pairing codes (pairing_codes: a hash of each, never the code) and wrong guesses (pairing_misses: who, when)."""

from __future__ import annotations

import hashlib

from bicameral.store.sql import SqlDatabase

# Codes past their end and misses older than this are deleted when a new code is issued or a miss recorded.
FORGET_AFTER_SECONDS = 7 * 86400


def code_hash(code: str) -> str:
    """What is stored for a code: its SHA-256 (codes are random, short-lived and tried a few times at most)."""
    return hashlib.sha256(code.strip().upper().encode("utf-8")).hexdigest()


class PairingStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def issue(self, code: str, issued_by: str, *, now: float, expires_at: float) -> None:
        """Keep a new code (as its hash) until `expires_at`."""
        with self._db.tx() as conn:
            conn.execute("DELETE FROM pairing_codes WHERE expires_at < ?", (now - FORGET_AFTER_SECONDS,))
            conn.execute(
                "INSERT INTO pairing_codes (code_hash, issued_by, issued_at, expires_at) VALUES (?, ?, ?, ?)",
                (code_hash(code), issued_by, now, expires_at),
            )

    def redeem(self, code: str, used_by: str, *, now: float) -> bool:
        """Use a code: True only for a code issued, not expired and never used before (then it is used up)."""
        with self._db.tx() as conn:
            used = conn.execute(
                """UPDATE pairing_codes SET used_by = ?, used_at = ?
                   WHERE code_hash = ? AND used_by IS NULL AND expires_at > ?""",
                (used_by, now, code_hash(code), now),
            )
            return used.rowcount == 1

    def give_back(self, code: str) -> None:
        """Undo `redeem` (the person could not be let in after all): the code works again until it expires."""
        with self._db.tx() as conn:
            conn.execute("UPDATE pairing_codes SET used_by = NULL, used_at = NULL WHERE code_hash = ?", (code_hash(code),))

    def used_by(self, code: str) -> str | None:
        row = self._db.query_one("SELECT used_by FROM pairing_codes WHERE code_hash = ?", (code_hash(code),))
        return None if row is None else row["used_by"]

    def misses(self, sender: str, *, since: float) -> int:
        """Wrong codes from this sender since then."""
        row = self._db.query_one("SELECT COUNT(*) FROM pairing_misses WHERE sender = ? AND at >= ?", (sender, since))
        return int(row[0]) if row else 0

    def record_miss(self, sender: str, *, now: float) -> None:
        with self._db.tx() as conn:
            conn.execute("DELETE FROM pairing_misses WHERE at < ?", (now - FORGET_AFTER_SECONDS,))
            conn.execute("INSERT INTO pairing_misses (sender, at) VALUES (?, ?)", (sender, now))
