"""The commands a lane answers itself: /memory, /forget, /reminders, /timezone, /commands and the owner's own ones."""

from __future__ import annotations

import logging

from bicameral.commands import CommandContext
from bicameral.commands.registry import Commands
from bicameral.context.memory import command_reach
from bicameral.events import Authority, Inbound, OwnerId, authority_of, chat_key, is_owner
from bicameral.failures import command_failed
from bicameral.store import Stores
from bicameral.store.memory_index import Fact
from bicameral.store.memory_scopes import GLOBAL, Reach
from bicameral.store.schedule_times import BadTime, next_cron, zone
from bicameral.store.schedules import ScheduleStore
from bicameral.tools.reminders import NOT_YOURS, describe, user_timezone

log = logging.getLogger(__name__)

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


# --- the owner's own commands (commands/): `/<name> args` for everyone allowed, `/commands` to list them ---

_COMMANDS_USAGE = "Use /commands to list them; the owner also has /commands history <name> and /commands reload."


def typed_command(inbound: Inbound) -> tuple[str, str] | None:
    """The command name and the words after it, if a person typed it just now (never an edit, forward or caption)."""
    name = inbound.command
    if name is None or inbound.kind not in ("message", "command") or {"forwarded", "caption"} & set(inbound.flags):
        return None
    parts = inbound.text.split(maxsplit=1)
    return name, parts[1] if len(parts) > 1 else ""


async def answer_command(commands: Commands, inbound: Inbound, name: str, *, owner: bool) -> str:
    """The answer to `/commands …` or `/<name> args`; a failure on our side as its sentence."""
    argument = (typed_command(inbound) or ("", ""))[1]
    try:
        if name == "commands":
            return await commands_command(commands, argument, owner=owner)
        return await run_owner_made(commands, inbound, name, argument, owner=owner)
    except Exception:
        log.exception("/%s failed in %s", name, inbound.chat)
        return command_failed(name)


async def run_owner_made(commands: Commands, inbound: Inbound, name: str, argument: str, *, owner: bool) -> str:
    """`/<name> args`: the command run without a model, its answer or a sentence saying why not."""
    context = CommandContext(
        sender_id=inbound.sender.id, sender_name=inbound.sender.name, chat=inbound.chat, channel=inbound.channel,
        is_owner=owner,
    )
    return await commands.run_typed(name, argument, context)


async def commands_command(commands: Commands, argument: str, *, owner: bool) -> str:
    """`/commands`: the owner's commands; `/commands history NAME` its git log; `/commands reload` (the owner's)."""
    words = argument.split()
    if not words:
        current = commands.current.commands
        if not current:
            return "There are no commands yet. The owner can ask me to write one."
        lines = [f"/{s.name} — {s.description}" for s in sorted(current.values(), key=lambda s: s.name)]
        return "\n".join(lines)
    if not owner:
        return _COMMANDS_USAGE
    if words[0] == "history" and len(words) == 2:
        history = await commands.history.log(words[1].lstrip("/"))
        return history.strip() or f"No history for /{words[1].lstrip('/')}."
    if words == ["reload"]:
        loaded = await commands.reload()
        names = ", ".join(f"/{n}" for n in sorted(loaded.commands)) or "none"
        skipped = "".join(f"\n- {p}" for p in loaded.problems)
        return f"Reloaded: {names}." + (f"\nSkipped:{skipped}" if skipped else "")
    return _COMMANDS_USAGE


# --- as a lane answers them ---


def lane_memory_command(stores: Stores, inbound: Inbound, command: str, personal: bool, owner_id: OwnerId) -> str:
    """/memory or /forget as typed in a chat: the reply (a failure is a sentence, logged)."""
    reach = command_reach(inbound, personal=personal, owner=is_owner(inbound, owner_id))
    parts = inbound.text.split(maxsplit=1)
    try:
        return (memory_command if command == "memory" else forget_command)(stores, reach, parts[1] if len(parts) > 1 else "")
    except Exception:
        log.exception("/%s failed in %s", command, inbound.chat)
        return command_failed(command)


def lane_schedules_command(store: ScheduleStore, inbound: Inbound, command: str, owner_id: OwnerId, now: float) -> str:
    """/reminders or /timezone as typed in a chat: the reply (a failure is a sentence, logged)."""
    parts = inbound.text.split(maxsplit=1)
    argument = parts[1] if len(parts) > 1 else ""
    try:
        if command == "reminders":
            return reminders_command(store, inbound, argument, by=authority_of(inbound, owner_id), now=now)
        return timezone_command(store, inbound, argument)
    except Exception:
        log.exception("/%s failed in %s", command, inbound.chat)
        return command_failed(command)
