"""Dashboard logins: one-time links (10 minutes, one use) that open sessions; sessions expire or end all at once."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from bicameral.types import Clock

LINK_SECONDS = 600.0
SESSION_SECONDS = 12 * 3600.0
MAX_PENDING_LINKS = 20  # an owner asking again and again does not grow this without bound


def _digest(token: str) -> str:
    # Only digests are kept: a token is compared by its digest, so no timing of the lookup tells its bytes.
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True)
class Session:
    csrf: str  # sent back with every state-changing request
    expires_at: float


class Logins:
    """What this process issued: login links not yet used, and open sessions. Another process knows none of them."""

    def __init__(self, *, clock: Clock = time.time) -> None:
        self._clock = clock
        self._links: dict[str, float] = {}
        self._sessions: dict[str, Session] = {}

    def new_link_token(self) -> str:
        now = self._clock()
        self._links = {k: at for k, at in self._links.items() if at > now}
        while len(self._links) >= MAX_PENDING_LINKS:
            self._links.pop(min(self._links, key=self._links.__getitem__))
        token = secrets.token_urlsafe(32)
        self._links[_digest(token)] = now + LINK_SECONDS
        return token

    def redeem(self, token: str) -> tuple[str, Session] | None:
        """A session for a valid link, which is used up; None for an unknown, used or expired one."""
        expires = self._links.pop(_digest(token), None)
        now = self._clock()
        if expires is None or expires <= now:
            return None
        cookie = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(24), expires_at=now + SESSION_SECONDS)
        self._sessions[_digest(cookie)] = session
        return cookie, session

    def session(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        key = _digest(cookie)
        session = self._sessions.get(key)
        if session is None:
            return None
        if session.expires_at <= self._clock():
            del self._sessions[key]
            return None
        return session

    def end(self, cookie: str) -> None:
        self._sessions.pop(_digest(cookie), None)

    def end_all(self) -> int:
        """`/dashboard logout-all`: every session and unused link ends; how many sessions there were."""
        count = len(self._sessions)
        self._sessions.clear()
        self._links.clear()
        return count


def same_token(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())
