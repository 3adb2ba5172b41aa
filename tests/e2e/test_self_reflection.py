"""The self-reflection schedule: off by default, seeded on start when on, protected, re-seeded, retired when off."""

from __future__ import annotations

from tests.conftest import OWNER
from tests.support.database import app_database

NO_SCHEDULES = "No reminders or scheduled tasks in this chat. Ask me to remind you of something."


async def _reminders(telegram, text: str = "/reminders") -> str:
    before = len(telegram.sent_messages(OWNER))
    telegram.user_sends(OWNER, text)
    return (await telegram.await_sent(OWNER, before + 1))[before]["text"]


async def test_off_by_default(telegram, models, start_bot):
    await start_bot()
    assert await _reminders(telegram) == NO_SCHEDULES


async def test_seeded_protected_reseeded_and_retired(telegram, models, start_bot, make_settings):
    app = await start_bot(self_reflection=True, self_reflection_cron="0 3 * * *")
    listing = await _reminders(telegram)
    assert listing.startswith("#1 ⚙️ task: # Self-reflection (daily)") and ", 03:00 UTC, repeats 0 3 * * *" in listing
    for command in ("/reminders cancel 1", "/reminders pause 1"):
        assert "protected" in await _reminders(telegram, command)
    await app.stop()

    # Removed behind its back (here with SQL): the next start brings it back.
    with app_database(make_settings()) as db:
        db.execute("UPDATE schedules SET state = 'done', next_due = NULL")
    app = await start_bot(self_reflection=True, self_reflection_cron="0 3 * * *")
    assert (await _reminders(telegram)).startswith("#1 ⚙️ task: # Self-reflection (daily)")
    await app.stop()

    await start_bot()  # turned off again
    assert await _reminders(telegram) == NO_SCHEDULES
