"""How a fire reaches its chat: a reminder's text is sent as is; a scheduled task becomes a turn.

A text reminder goes straight out through the router, like any reply: it is the person's own words, so
a model turn would only add cost and seconds of delay, could reword or drop it, and a thousand due at
once would be a thousand model calls. Going through the router keeps it in the chat's one outbound path
(recorded as sent, so later turns see it). A task needs thinking, so it enters as a synthetic inbound
message through the same inbox as a person's: persisted as pending first (a crash replays it), then
answered by whichever chamber runs the chat (a turn in single mode; the front hands it to the back).
A follow-up (the front's question for someone who went quiet mid-thought) is sent as is, unless they
spoke after it was set or it is so late that the thought has gone cold.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from bicameral.events import ActionResult, Inbound, Sender, SendText, split_chat_key
from bicameral.store.messages import MessageStore
from bicameral.store.schedule_times import lateness
from bicameral.store.schedules import Fire
from bicameral.store.skills import SkillError, Skills

log = logging.getLogger(__name__)

REMINDER_PREFIX = "⏰ Reminder: "
_FIRE_ID = re.compile(r"schedule-(\d+)-fire-\d+")


def fired_schedule(inbound: Inbound) -> int | None:
    """The schedule whose fire this synthetic message is, or None for anything else."""
    found = _FIRE_ID.fullmatch(inbound.message_id) if inbound.kind == "synthetic" else None
    return int(found.group(1)) if found else None


class Recording(Protocol):
    """The outbox's perform: `on_recorded` runs once the message is written down, before it is sent."""

    def __call__(
        self, action: SendText, *, on_recorded: Callable[[], None] | None = None
    ) -> Awaitable[ActionResult]: ...


class FireDelivery:
    def __init__(
        self,
        perform: Recording,
        messages: MessageStore,
        submit: Callable[[Inbound], Awaitable[None]],
        *,
        delivered: Callable[[Fire], None] = lambda fire: None,
        late_after_seconds: float = 60.0,
        followup_stale_after_seconds: float = 1800.0,
        skills: Skills | None = None,
    ) -> None:
        self._perform = perform
        self._delivered = delivered
        self._messages = messages
        self._submit = submit
        self._late_after = late_after_seconds
        self._followup_stale_after = followup_stale_after_seconds
        self._skills = skills

    async def __call__(self, fire: Fire) -> bool:
        if fire.kind == "followup":
            return await self._follow_up(fire)
        late = ""
        if fire.late_by > self._late_after:
            late = f" (late by {lateness(fire.late_by)}: I was offline when it was due)"
        if fire.kind == "text":
            text = REMINDER_PREFIX + fire.body + late
            # Delivered once the outbox holds it, which sends it across restarts: a restart between the two would
            # otherwise both deliver the recorded message and fire the reminder again.
            result = await self._perform(
                SendText(chat=fire.chat, text=text, audience=fire.written_by.people), on_recorded=lambda: self._delivered(fire)
            )
            # A queued message counts as delivered (ok): the outbox has it recorded and retries it across restarts.
            if not result.ok:
                log.warning("reminder %d to %s not sent: %s", fire.schedule_id, fire.chat, result.error)
            return result.ok
        channel, _ = split_chat_key(fire.chat)
        # Its one author speaks (a DM's key is also its chat's); a group schedule nobody in particular set, the scheduler.
        authors = fire.written_by.people
        alone = len(authors) == 1 and (fire.private or authors[0] != fire.chat)
        person = split_chat_key(authors[0])[1] if alone else "scheduler"
        inbound = Inbound(
            channel=channel,
            chat=fire.chat,
            # Not a platform's message id: an answer to the fire replies to nothing (see Turn.reply_anchor).
            message_id=f"schedule-{fire.schedule_id}-fire-{fire.id}",
            sender=Sender(id=person, name="scheduled task"),
            text=f'<scheduled_task id="{fire.schedule_id}"{late and " late=" + repr(lateness(fire.late_by))}'
            f"{f' skill={fire.skill!r}' if fire.skill else ''}>\n{self._task(fire)}\n</scheduled_task>",
            ts=fire.fired_at,
            kind="synthetic",
            chat_type="private" if fire.private else "group",
            # Negative: never a platform's update id, and unique per fire, so a re-delivery is stored once.
            update_id=-fire.id,
            # Its words' authors, not whoever created it: an edited schedule runs with the least of them.
            authority=fire.authority,
        )
        row_id = self._messages.record_inbound(inbound)
        if row_id is not None:
            await self._submit(replace(inbound, row_id=row_id))
        return True

    def _task(self, fire: Fire) -> str:
        """What a scheduled task asks: its text, or the instructions of the skill it carries with its text as context.

        The skill is the schedule's own field (set through schedule_create), never words in the text: a person who
        types the same words sends plain text."""
        if fire.skill is None:
            return fire.body
        try:
            if self._skills is None:
                raise SkillError("skills are not available here")
            skill = self._skills.require(fire.skill)
        except SkillError as exc:
            log.warning("schedule %d's skill %s is not available: %s", fire.schedule_id, fire.skill, exc)
            return (
                f"This task was to run the skill {fire.skill!r}, which is not available now ({exc}). Tell the person "
                f"so in one line, so they can fix it or cancel schedule #{fire.schedule_id}.\nThe schedule says: {fire.body}"
            )
        return (
            f"Run the skill {skill.name!r}: follow its instructions below.\n<skill_instructions>\n{skill.instructions}\n"
            f"</skill_instructions>\nThe schedule says: {fire.body}"
        )

    async def _follow_up(self, fire: Fire) -> bool:
        spoke = self._messages.last_inbound_at(fire.chat)
        if fire.set_at is not None and spoke is not None and spoke > fire.set_at:
            log.info("follow-up in %s dropped: the user spoke after it was set", fire.chat)
            return True
        if fire.late_by > self._followup_stale_after:
            log.info("follow-up in %s dropped: %s late", fire.chat, lateness(fire.late_by))
            return True
        result = await self._perform(SendText(chat=fire.chat, text=fire.body))
        if not result.ok:
            log.warning("follow-up to %s not sent: %s", fire.chat, result.error)
        return result.ok
