"""The self-reflection loop's schedule: seeded (and re-seeded) on start when it is on, retired when off.

It carries the shipped `self-reflection` skill, whose instructions the executor gets as the task when it fires.

It is protected: the schedule tools and /reminders refuse to cancel, pause or edit it, so a model talked
into "stop reviewing yourself" cannot end it; and every start brings it back if it was removed anyway.
"""

from __future__ import annotations

import logging

from bicameral.errors import ConfigError
from bicameral.store.schedule_times import BadTime, next_cron
from bicameral.store.schedules import Schedule, ScheduleStore

log = logging.getLogger(__name__)

REFLECTION_KEY = "self-reflection"
REFLECTION_SKILL = "self-reflection"  # the shipped skill (prompts/skills/self-reflection/SKILL.md) holds the playbook
REFLECTION_BODY = "# Self-reflection (daily): the daily pass over my own replies and the pending learnings"


def seed_reflection(store: ScheduleStore, *, enabled: bool, owner_chat: str | None, cron: str, now: float) -> Schedule | None:
    """Keep the daily reflection task in the owner's DM when enabled (and an owner is known); else retire it."""
    if not enabled or owner_chat is None:
        if store.retire_protected(REFLECTION_KEY):
            log.info("self-reflection is off: its schedule was retired")
        elif enabled:
            log.warning("self-reflection needs BICAMERAL_OWNER_ID to know whom to ask; it is not scheduled")
        return None
    try:
        next_due = next_cron(cron, "UTC", now)
    except BadTime as exc:
        raise ConfigError(f"BICAMERAL_SELF_REFLECTION_CRON: {exc}") from None
    return store.keep_protected(
        REFLECTION_KEY, chat=owner_chat, creator=owner_chat, body=REFLECTION_BODY, tz="UTC", cron=cron,
        next_due=next_due, now=now, skill=REFLECTION_SKILL,
    )
