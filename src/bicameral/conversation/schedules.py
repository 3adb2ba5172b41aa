"""The /reminders and /timezone commands: list, pause, resume and cancel a chat's schedules; set one's zone."""

from __future__ import annotations

from bicameral.events import Authority, Inbound, chat_key
from bicameral.store.schedule_times import BadTime, next_cron, zone
from bicameral.store.schedules import ScheduleStore
from bicameral.tools.reminders import NOT_YOURS, describe, user_timezone

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
