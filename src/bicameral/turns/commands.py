"""The commands a lane answers itself: /memory and /forget; /reminders and /timezone (a chat's schedules, one's zone)."""

from __future__ import annotations

from bicameral.events import Authority, Inbound, chat_key
from bicameral.store import Stores
from bicameral.store.memory_index import Fact
from bicameral.store.memory_scopes import GLOBAL, Reach
from bicameral.store.schedule_times import BadTime, next_cron, zone
from bicameral.store.schedules import ScheduleStore
from bicameral.tools.reminders import NOT_YOURS, describe, user_timezone

# --- the /memory and /forget commands ---

_LIST_LIMIT = 50


def listing_scopes(reach: Reach) -> tuple[str, ...]:
    """What a command may show: in a group only the group's facts (private ones are not read out to everyone)."""
    if reach.group:
        return tuple(s for s in reach.readable if s != GLOBAL and not s.startswith("user:")) + ((GLOBAL,) if reach.owner else ())
    return tuple(s for s in reach.readable if s != GLOBAL or reach.owner)


def memory_command(stores: Stores, reach: Reach, argument: str) -> str:
    """`/memory`: what is remembered here, with ids; `/memory stats`: how much, and any unreadable files."""
    scopes = listing_scopes(reach)
    if argument.strip().lower() == "stats":
        stats = stores.memory.stats(reach.readable)
        lines = [f"{reach.describe(s)}: {stats.counts.get(s, 0)} fact(s)" for s in reach.readable]
        if reach.owner and stats.broken:
            lines.append("Memory files I skipped (fix them and I read them again):")
            lines += [f"- {path}: {error}" for path, error in stats.broken]
        return "\n".join(lines)
    facts = stores.memory.all(scopes, _LIST_LIMIT)
    if not facts:
        where = "this group" if reach.group else "you"
        return f"I don't remember anything about {where} yet. Tell me something and ask me to remember it."
    title = "What I remember in this group:" if reach.group else "What I remember about you:"
    lines = [title, *(_line(f, reach) for f in facts)]
    if reach.group and reach.person is not None:
        lines.append("(Your private notes stay private: send /memory to me directly to see them.)")
    lines.append("Forget one with /forget <id or words>.")
    return "\n".join(lines)


def forget_command(stores: Stores, reach: Reach, argument: str) -> str:
    """`/forget <id or words>`: delete from the memory files and the index, and from this chat's session."""
    what = argument.strip()
    if not what:
        return "Tell me what to forget: /forget <id or words> (see /memory for ids)."
    scopes = tuple(s for s in listing_scopes(reach) if s in reach.forgettable)
    gone = stores.memory.forget(what, scopes)
    if not gone:
        return f"I found nothing to forget matching “{what}”. See /memory for what I keep."
    stores.sessions.scrub(reach.chat, [f.text for f in gone])
    return "Forgotten:\n" + "\n".join(_line(f, reach) for f in gone)


def _line(fact: Fact, reach: Reach) -> str:
    return f"- [{fact.id}] {fact.text}" + ("" if fact.scope.startswith("user:") else f" ({reach.describe(fact.scope)})")


# --- the /reminders and /timezone commands: list, pause, resume and cancel a chat's schedules; set one's zone ---

_USAGE = "Use /reminders to list them, or /reminders pause|resume|cancel <number>."


def reminders_command(store: ScheduleStore, inbound: Inbound, argument: str, *, by: Authority, now: float) -> str:
    words = argument.split()
    if not words:
        schedules = store.live(inbound.chat)
        if not schedules:
            return "No reminders or scheduled tasks in this chat. Ask me to remind you of something."
        return "\n".join(describe(s) for s in schedules) + "\n\n" + _USAGE
    verb = words[0].lower()
    if verb not in ("pause", "resume", "cancel") or len(words) != 2 or not words[1].lstrip("#").isdigit():
        return _USAGE
    number = int(words[1].lstrip("#"))
    schedule = store.get(number)
    if schedule is None or schedule.state == "done" or (schedule.chat != inbound.chat and not by.is_owner):
        return f"There is no reminder #{number} in this chat. {_USAGE}"
    if schedule.protected is not None and verb != "resume":
        return f"#{number} is a protected schedule the assistant keeps; the owner turns it off in the settings."
    if not by.may_steer(schedule.written_by):
        return NOT_YOURS.format(id=number) + "."
    if verb == "pause":
        store.update(number, state="paused")
        return f"Paused #{number}."
    if verb == "cancel":
        store.update(number, state="done")
        return f"Cancelled #{number}."
    due = next_cron(schedule.cron, schedule.tz, now) if schedule.cron else schedule.next_due
    store.update(number, state="active", next_due=due)
    return f"Resumed: {describe(store.get(number) or schedule)}"


def timezone_command(store: ScheduleStore, inbound: Inbound, argument: str) -> str:
    user = chat_key(inbound.channel, inbound.sender.id)
    name = argument.strip()
    if not name:
        current = user_timezone(store, user)
        return f"Your time zone is {current}. Change it with /timezone <Area/City>, e.g. /timezone Europe/Berlin."
    try:
        zone(name)
    except BadTime as exc:
        return f"I can't use that: {exc}."
    store.set_timezone(user, name)
    return f"Your time zone is now {name}. New reminders use it; existing ones keep the zone they were set in."
