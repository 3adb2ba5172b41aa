"""Pairing: the owner's one-time code lets a stranger in. Issued by /pair, redeemed in the gate before a refusal."""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bicameral.events import Inbound, OwnerId, SendText, chat_key, owner_on, person_key
from bicameral.gate.access import AccessConfig, AccessFileError, AccessPolicy
from bicameral.store.pairing import PairingStore
from bicameral.types import Clock

log = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_VALID_SECONDS = 600
# Wrong codes a stranger may send in the window; past that, what they send is not even checked.
MAX_MISSES = 5
MISS_WINDOW_SECONDS = 600

# A message that tries a code: eight characters a code could be made of (in any case), or /start with a word after it
# (Telegram's t.me/<bot>?start=CODE link sends that).
_LOOKS_LIKE_CODE = re.compile(r"[A-Za-z2-9]{8}")

WELCOME = "Welcome! You're in now: write to me any time."
WRONG_CODE = "That code didn't work. Ask the owner for a new one."
LET_IN_LATER = "That code is right, but I can't let you in just now; the owner has been told."


@dataclass(frozen=True)
class Issued:
    code: str
    expires_at: float


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def code_attempt(inbound: Inbound) -> str | None:
    """The code a stranger's message tries, if it is a try at all: the code alone, or `/start CODE`."""
    if not inbound.is_private or inbound.kind not in ("message", "edit") or inbound.attachment_refs:
        return None
    if "caption" in inbound.flags:
        return None
    text = inbound.text.strip()
    if inbound.command == "start":
        parts = text.split()
        return parts[1] if len(parts) == 2 else None
    return text if _LOOKS_LIKE_CODE.fullmatch(text) else None


class Pairing:
    """Issues codes (kept as hashes) and, for the gate, redeems one a stranger sends in a private chat."""

    def __init__(self, store: PairingStore, access: AccessPolicy, *, owner_id: OwnerId, clock: Clock = time.time) -> None:
        self._store = store
        self._access = access
        self._owner_id = owner_id
        self._clock = clock

    def issue(self, issued_by: str) -> Issued:
        now = self._clock()
        code = new_code()
        expires_at = now + CODE_VALID_SECONDS
        self._store.issue(code, issued_by, now=now, expires_at=expires_at)
        return Issued(code, expires_at)

    def redeem(self, inbound: Inbound) -> Sequence[SendText] | None:
        """A stranger's message the gate is about to refuse: None if it tries no code (refuse it as usual); otherwise
        what to tell whom (nothing once the sender has used up their tries). The message itself is not kept."""
        attempt = code_attempt(inbound)
        if attempt is None:
            return None
        sender, now = person_key(inbound), self._clock()
        if self._store.misses(sender, since=now - MISS_WINDOW_SECONDS) >= MAX_MISSES:
            log.info("pairing: %s is out of tries; not checked", sender)
            return ()
        if not self._store.redeem(attempt, sender, now=now):
            self._store.record_miss(sender, now=now)
            log.warning("pairing: a wrong or used-up code from %s", sender)  # never what they sent
            return (SendText(chat=inbound.chat, text=WRONG_CODE),)
        try:
            was = self._admit(inbound.sender.id)
        except AccessFileError as exc:
            self._store.give_back(attempt)
            log.error("pairing: %s had a right code but access.json cannot be read: %s", sender, exc.reason)
            return (
                SendText(chat=inbound.chat, text=LET_IN_LATER),
                *self._to_owner(inbound, f"{_who(inbound)} sent a right pairing code, but I can't add them: {exc.path} "
                                "can't be read ({exc.reason}). Fix the file; the code works again until it expires."),
            )
        log.warning("pairing: %s let in with a code", sender)
        note = (
            " The policy was owner_only, which doesn't read allowed_users, so it is allowlist now."
            if was == "owner_only" else ""
        )
        return (
            SendText(chat=inbound.chat, text=WELCOME),
            *self._to_owner(inbound, f"{_who(inbound)} joined with a pairing code and is in allowed_users now.{note}"),
        )

    def _admit(self, sender_id: str) -> str:
        """Add the sender to allowed_users (owner_only becomes allowlist); returns the policy before."""
        before: list[str] = []
        user: int | str = int(sender_id) if sender_id.lstrip("-").isdigit() else sender_id

        def admit(config: AccessConfig) -> AccessConfig:
            before.append(config.policy)
            users = config.allowed_users
            if not any(str(u) == str(user) for u in users):
                users = [*users, user]
            policy = "allowlist" if config.policy == "owner_only" else config.policy
            return config.model_copy(update={"allowed_users": users, "policy": policy})

        self._access.update(admit)
        return before[0]

    def _to_owner(self, inbound: Inbound, text: str) -> tuple[SendText, ...]:
        owner = owner_on(self._owner_id, inbound.channel)
        if owner is None:
            return ()
        return (SendText(chat=chat_key(inbound.channel, owner), text=text),)


def _who(inbound: Inbound) -> str:
    sender = inbound.sender
    handle = f"@{sender.username}, " if sender.username else ""
    return f"{sender.name or 'Someone'} ({handle}id {sender.id})"
