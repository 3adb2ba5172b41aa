"""The schedule tools: create, list, pause, resume, edit and cancel reminders and scheduled tasks of this chat."""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, Field

from bicameral.store.schedule_times import BadTime, local_to_epoch, next_cron, readable, shortest_gap, zone
from bicameral.store.schedules import Schedule, ScheduleLimitError, ScheduleStore
from bicameral.store.skills import SkillError
from bicameral.tools.base import Tool, ToolContext, ToolResult

_TEN_YEARS_MINUTES = 10 * 366 * 24 * 60


class When(BaseModel):
    at: str | None = Field(
        default=None, max_length=40, description="An exact local time, YYYY-MM-DD HH:MM, in the user's time zone."
    )
    in_minutes: float | None = Field(default=None, gt=0, le=_TEN_YEARS_MINUTES, description="Or: this many minutes from now.")
    cron: str | None = Field(
        default=None,
        max_length=100,
        description="Or, to repeat: a cron expression on the user's local clock (minute hour day month weekday), "
        "e.g. '30 8 * * 1-5' for weekdays at 8:30, '0 18 * * 5L' for the last Friday of each month.",
    )


class CreateArgs(When):
    text: str = Field(min_length=1, max_length=2000, description="What to remind of, or the task to carry out.")
    kind: Literal["text", "task"] = Field(
        default="text", description="'text': send the text as a reminder. 'task': do the work described, then report."
    )
    timezone: str | None = Field(default=None, max_length=64, description="IANA zone; default: the user's own.")
    skill: str | None = Field(
        default=None, max_length=100,
        description="A skill (from skill_list) to run when it fires: a task whose instructions are the skill's, "
        "with `text` as what it is about.",
    )


class ListArgs(BaseModel):
    all_chats: bool = Field(default=False, description="Owner only: every chat's schedules, not just this chat's.")


class IdArgs(BaseModel):
    id: int = Field(ge=1, description="The schedule's number, as listed.")


class EditArgs(When):
    id: int = Field(ge=1, description="The schedule's number, as listed.")
    text: str | None = Field(default=None, min_length=1, max_length=2000, description="New text, if it changes.")


NumberedT = TypeVar("NumberedT", IdArgs, EditArgs)


def describe(schedule: Schedule) -> str:
    """One line a person can read: number, what, when, how often, whether paused."""
    what = ("⏰ " if schedule.kind == "text" else "⚙️ task: ") + _short(schedule.body)
    if schedule.skill:
        what += f" (skill {schedule.skill})"
    when = readable(schedule.next_due, schedule.tz) if schedule.next_due is not None else "no time"
    every = f", repeats `{schedule.cron}`" if schedule.cron else ""
    paused = " [paused]" if schedule.state == "paused" else ""
    return f"#{schedule.id} {what} — next {when}{every}{paused}"


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_UNAVAILABLE = "reminders are not available in this conversation"
NOT_YOURS = "#{id} was set by someone else; only they, the owner or a group admin can change it"


def _store(ctx: ToolContext) -> ScheduleStore | None:
    return ctx.stores.schedules if ctx.stores is not None else None


def _creator(ctx: ToolContext) -> str:
    """The person a schedule counts against: the one this conversation belongs to, else the chat."""
    return ctx.reach.person if ctx.reach is not None and ctx.reach.person else ctx.chat


def user_timezone(store: ScheduleStore, user: str) -> str:
    return store.timezone_of(user) or store.policy.default_tz


def _due(store: ScheduleStore, when: When, tz: str, now: float) -> tuple[float, str | None]:
    """The first due time and the cron (None for a one-shot); BadTime says what is wrong."""
    given = [name for name in ("at", "in_minutes", "cron") if getattr(when, name) is not None]
    if len(given) != 1:
        raise BadTime("give exactly one of `at` (a local time), `in_minutes` or `cron`")
    if when.cron is not None:
        cron = " ".join(when.cron.split())
        gap = shortest_gap(cron, tz, now)
        if gap < store.policy.min_interval_seconds:
            raise BadTime(
                f"`{cron}` would repeat every {gap:g} s; schedules may repeat at most every "
                f"{store.policy.min_interval_seconds / 60:g} min"
            )
        return next_cron(cron, tz, now), cron
    if when.in_minutes is not None:
        return now + when.in_minutes * 60, None
    assert when.at is not None
    due = local_to_epoch(when.at, tz)
    if due <= now:
        raise BadTime(f"{readable(due, tz)} is already past (it is now {readable(now, tz)}); give a future time")
    return due, None


def _target(ctx: ToolContext, schedule_id: int) -> tuple[ScheduleStore, Schedule] | ToolResult:
    """The store and the schedule this chat (or the owner) may change, or the answer saying why not.

    A missing schedule and another chat's get the same answer; a protected one is refused.
    """
    store = _store(ctx)
    if store is None:
        return ToolResult.error(_UNAVAILABLE)
    schedule = store.get(schedule_id)
    if schedule is None or schedule.state == "done" or (schedule.chat != ctx.chat and not ctx.is_owner):
        return ToolResult.error(f"there is no schedule #{schedule_id} in this chat; list them to see the numbers")
    if schedule.protected is not None:
        return ToolResult.error(
            f"#{schedule.id} is a protected schedule the assistant keeps; it cannot be changed here "
            "(the owner turns it off in the settings)"
        )
    if not ctx.authority.may_steer(schedule.written_by):
        return ToolResult.error(NOT_YOURS.format(id=schedule.id))
    return store, schedule


class _OneSchedule(Tool[NumberedT]):
    """A tool that acts on one schedule, named by its number, that this chat (or the owner) may change."""

    async def run(self, args: NumberedT, ctx: ToolContext) -> ToolResult:
        target = _target(ctx, args.id)
        if isinstance(target, ToolResult):
            return target
        store, found = target
        return await self.act(store, found, args, ctx)

    async def act(self, store: ScheduleStore, found: Schedule, args: NumberedT, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError


class CreateSchedule(Tool[CreateArgs]):
    name = "schedule_create"
    description = (
        "Set a reminder or a scheduled task for this chat: at an exact local time, in N minutes, or repeating by "
        "cron, in the user's time zone. Tell the user the resolved time from the result so a misunderstanding shows."
    )
    args_model = CreateArgs

    async def run(self, args: CreateArgs, ctx: ToolContext) -> ToolResult:
        store = _store(ctx)
        if store is None:
            return ToolResult.error(_UNAVAILABLE)
        creator = _creator(ctx)
        now = ctx.now().timestamp()
        skill = args.skill.strip() if args.skill else None
        if skill is not None:
            try:
                skill = ctx.stores.skills.require(skill).name if ctx.stores is not None else None
            except SkillError as exc:
                return ToolResult.error(str(exc))
        kind: Literal["text", "task"] = "task" if skill else args.kind  # a skill is carried out, never just sent
        try:
            tz = args.timezone or user_timezone(store, creator)
            zone(tz)
            due, cron = _due(store, args, tz, now)
        except BadTime as exc:
            return ToolResult.error(str(exc))
        try:
            schedule = store.create(
                chat=ctx.chat, creator=creator, kind=kind, body=args.text.strip(), tz=tz, next_due=due, now=now,
                cron=cron, private=ctx.reach is None or not ctx.reach.group, limit=store.policy.per_user,
                authority=ctx.authority, skill=skill,
            )
        except ScheduleLimitError:
            return ToolResult.error(
                f"you already have {store.policy.per_user} schedules, the most allowed; cancel some first"
            )
        label = "Reminder" if kind == "text" else "Scheduled task"
        repeat = f", then repeating `{cron}`" if cron else ""
        runs = f", running the skill {skill}" if skill else ""
        return ToolResult(f"{label} #{schedule.id} set for {readable(due, tz)}{repeat}{runs}.")


class ListSchedules(Tool[ListArgs]):
    name = "schedule_list"
    description = "List this chat's reminders and scheduled tasks with their numbers and next times."
    args_model = ListArgs

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        store = _store(ctx)
        if store is None:
            return ToolResult.error(_UNAVAILABLE)
        every_chat = args.all_chats and ctx.is_owner
        schedules = store.live(None if every_chat else ctx.chat)
        if not schedules:
            return ToolResult("No reminders or scheduled tasks.")
        return ToolResult("\n".join(describe(s) + (f" (in {s.chat})" if every_chat else "") for s in schedules))


class PauseSchedule(_OneSchedule[IdArgs]):
    name = "schedule_pause"
    description = "Pause a reminder or scheduled task by its number; it keeps its place until resumed."
    args_model = IdArgs

    async def act(self, store: ScheduleStore, found: Schedule, args: IdArgs, ctx: ToolContext) -> ToolResult:
        store.update(found.id, state="paused")
        return ToolResult(f"Paused #{found.id}.")


class ResumeSchedule(_OneSchedule[IdArgs]):
    name = "schedule_resume"
    description = "Resume a paused reminder or scheduled task by its number."
    args_model = IdArgs

    async def act(self, store: ScheduleStore, found: Schedule, args: IdArgs, ctx: ToolContext) -> ToolResult:
        now = ctx.now().timestamp()
        due = next_cron(found.cron, found.tz, now) if found.cron else found.next_due
        store.update(found.id, state="active", next_due=due)
        when = readable(due, found.tz) if due is not None and due > now else "now (its time passed while paused)"
        return ToolResult(f"Resumed #{found.id}: next {when}.")


class EditSchedule(_OneSchedule[EditArgs]):
    name = "schedule_edit"
    description = "Change a reminder's or scheduled task's text or time (at, in_minutes or cron) by its number."
    args_model = EditArgs

    async def act(self, store: ScheduleStore, found: Schedule, args: EditArgs, ctx: ToolContext) -> ToolResult:
        retimed = any(getattr(args, name) is not None for name in ("at", "in_minutes", "cron"))
        if not retimed and args.text is None:
            return ToolResult.error("nothing to change: give a new text or a new time")
        due, cron = found.next_due, found.cron
        if retimed:
            try:
                due, cron = _due(store, args, found.tz, ctx.now().timestamp())
            except BadTime as exc:
                return ToolResult.error(str(exc))
        # New words in it: it fires with no more than the least of everyone who wrote any of its text.
        authority = found.written_by.joined(ctx.authority) if args.text else None
        store.update(
            found.id, next_due=due, body=args.text.strip() if args.text else None, cron=cron, clear_cron=cron is None,
            authority=authority,
        )
        edited = store.get(found.id)
        assert edited is not None
        return ToolResult("Changed: " + describe(edited))


class CancelSchedule(_OneSchedule[IdArgs]):
    name = "schedule_cancel"
    description = "Cancel a reminder or scheduled task for good, by its number."
    args_model = IdArgs

    async def act(self, store: ScheduleStore, found: Schedule, args: IdArgs, ctx: ToolContext) -> ToolResult:
        store.update(found.id, state="done")
        return ToolResult(f"Cancelled #{found.id}.")
