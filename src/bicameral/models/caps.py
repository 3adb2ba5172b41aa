"""Spending caps: the tokens a person other than the owner may spend per UTC day, and everyone together, checked
before each model call against counters kept in memory (the usage record is the truth at start and at each new
day; each recorded call adds to them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bicameral.events import OwnerId, Role, sender_role, split_chat_key
from bicameral.models.metered import ModelCall
from bicameral.types import Clock

EVERYONE = "*"  # the allowance key of everyone's cap together

# (day start) -> (every token since, in all; per person)
LoadSpend = Callable[[float], tuple[int, dict[str, int]]]
# (day "YYYY-MM-DD") -> per person (or EVERYONE): (extra tokens allowed, unlimited)
LoadAllowances = Callable[[str], dict[str, tuple[int, bool]]]


@dataclass(frozen=True)
class Refusal:
    """Why a call may not start: whose cap (a person key, or None for everyone's together), spent and allowed."""

    person: str | None
    spent: int
    cap: int

    def __str__(self) -> str:
        whose = f"{self.person}'s daily cap" if self.person else "the daily cap for everyone"
        return f"{whose} is reached ({self.spent:,} of {self.cap:,} tokens)"


def utc_day(now: float) -> tuple[str, float, float]:
    """`now`'s UTC day: its name (YYYY-MM-DD), its start and its end."""
    at = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return f"{at:%Y-%m-%d}", at.timestamp(), (at + timedelta(days=1)).timestamp()


def tokens_of(call: ModelCall) -> int:
    usage = call.usage
    return usage.input_tokens + usage.output_tokens + usage.cache_read_tokens + usage.cache_write_tokens


class SpendingCaps:
    """`per_user`: tokens a day for each person but the owner; `everyone`: for all together, owner included (None:
    no cap). `check(people)` before a call; `note(call)` after it."""

    def __init__(
        self,
        *,
        per_user: int | None,
        everyone: int | None,
        owner_id: OwnerId,
        load_spend: LoadSpend,
        load_allowances: LoadAllowances,
        clock: Clock = time.time,
    ) -> None:
        self.per_user = per_user
        self.everyone = everyone
        self._owner_id = owner_id
        self._load_spend = load_spend
        self._load_allowances = load_allowances
        self._clock = clock
        self.on_refusal: Callable[[Refusal], None] | None = None  # told of every refusal (the owner's notice)
        self.day = ""
        self._day_end = 0.0  # the counters hold the day before this
        self.total = 0
        self.spent: dict[str, int] = {}
        self.allowances: dict[str, tuple[int, bool]] = {}
        self._owners: dict[str, bool] = {}

    @property
    def active(self) -> bool:
        return self.per_user is not None or self.everyone is not None

    def check(self, people: tuple[str, ...], *, tell: bool = True) -> Refusal | None:
        """Why a call for these people may not start now, or None; the refusal is also handed to `on_refusal`
        (unless `tell` is False: a look at held messages, not a call)."""
        now = self._clock()
        if now >= self._day_end:
            self._roll(now)
        refusal = None
        if self.everyone is not None and (limit := self.limit(EVERYONE, self.everyone)) is not None and self.total >= limit:
            refusal = Refusal(None, self.total, limit)
        elif self.per_user is not None:
            for person in people:
                if self.is_owner(person):
                    continue
                limit = self.limit(person, self.per_user)
                if limit is not None and (spent := self.spent.get(person, 0)) >= limit:
                    refusal = Refusal(person, spent, limit)
                    break
        if refusal is not None and tell and self.on_refusal is not None:
            self.on_refusal(refusal)
        return refusal

    def refusal_text(self, people: tuple[str, ...]) -> str | None:
        """`check` as text, as `MeteredModel` takes it."""
        refusal = self.check(people)
        return None if refusal is None else str(refusal)

    def limit(self, person: str, cap: int) -> int | None:
        """Today's limit for `person` (or EVERYONE) under `cap`, with the owner's allowance; None: no limit today."""
        extra, unlimited = self.allowances.get(person, (0, False))
        return None if unlimited else cap + extra

    def note(self, call: ModelCall) -> None:
        """A finished call's tokens, added to today's counters."""
        if call.at >= self._day_end or not self.day:
            self._roll(call.at)  # the record already holds this call: the reload counts it
            return
        tokens = tokens_of(call)
        if not tokens or call.at < self._day_end - 86400:
            return
        self.total += tokens
        for person in call.people:
            self.spent[person] = self.spent.get(person, 0) + tokens

    def refresh(self) -> None:
        """The owner's allowances read again (after one was stored)."""
        now = self._clock()
        if now >= self._day_end:
            self._roll(now)
        self.allowances = self._load_allowances(self.day)

    def is_owner(self, person: str) -> bool:
        known = self._owners.get(person)
        if known is None:
            channel, user = split_chat_key(person)
            known = self._owners[person] = sender_role(channel, user, self._owner_id) is Role.OWNER
        return known

    def today(self) -> tuple[str, int, dict[str, int]]:
        """Today (UTC): its name, every token spent so far, and per person."""
        now = self._clock()
        if now >= self._day_end:
            self._roll(now)
        return self.day, self.total, dict(self.spent)

    def reread(self) -> None:
        """The day's counters and allowances read again: other workers on the database spend and allow too."""
        self._roll(self._clock())

    def _roll(self, now: float) -> None:
        """Counters for `now`'s day, from the record."""
        self.day, start, self._day_end = utc_day(now)
        self.total, self.spent = self._load_spend(start)
        self.allowances = self._load_allowances(self.day)
