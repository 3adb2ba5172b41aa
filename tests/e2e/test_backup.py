"""Backups of a running assistant: made while it answers, restored (once it has stopped) into a fresh data dir where
the conversation goes on; /audit shows the last one; a restore while it runs is refused."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from bicameral.app.backups import HEARTBEAT_SECONDS, backup_to, restore_from
from bicameral.backup import BackupError
from bicameral.doctor import live_check
from tests.conftest import OWNER
from tests.e2e.test_console_health import ask
from tests.fakes.model_server import Reply

# These expect a SQLite backup (bicameral.db in the archive) restored over the same app's database; a PostgreSQL
# backup (pg_dump) is restored only into an empty database, so these need their PostgreSQL form from backup/'s owner.
pytestmark = pytest.mark.sqlite_only(
    "these check a SQLite backup (bicameral.db in the archive, restored over the app's database); the PostgreSQL "
    "backup (pg_dump, restored into an empty database only) needs its own form of them"
)


async def test_a_backup_of_the_running_assistant_restores_its_history_in_a_fresh_data_dir(
    telegram, models, start_bot, tmp_path
):
    models.script(Reply(text="Noted: a blue bike."), Reply(text="Noted too."), Reply(text="Your bike is blue."))
    app = await start_bot()
    settings = app.settings
    telegram.user_sends(OWNER, "my bike is blue")
    await telegram.await_sent(OWNER, 1)
    workspace = settings.data_dir / "workspaces" / f"telegram_{OWNER}"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("tyre pressure 3 bar\n")
    archive = tmp_path / "saved" / "backup.tar.gz"

    # The backup runs in a thread while the chat goes on, as `bicameral backup` runs beside the process.
    backing_up = asyncio.create_task(asyncio.to_thread(backup_to, settings, archive))
    manifest = await backing_up
    assert {"bicameral.db", "instance_id", f"workspaces/telegram_{OWNER}/notes.txt"} <= {e.path for e in manifest.files}
    audit = await ask(telegram, "/audit", "Audit at")
    assert "Last backup: just now" in audit or " ago (" in audit.split("Last backup:")[1]

    with pytest.raises(BackupError, match="is running on"):
        restore_from(settings, archive)
    live = live_check(settings)  # the container's health check: an assistant holds this data dir, its loop turns
    assert live.ok and "Inbox: 0 not yet answered" in live.detail and "Outbox: 0 not yet delivered" in live.detail
    # A process that holds the data dir but whose event loop has stopped turning is not healthy.
    hung = live_check(settings, now=time.time() + 3 * HEARTBEAT_SECONDS + 5)
    assert not hung.ok and "event loop has not turned" in hung.detail
    telegram.user_sends(OWNER, "and my car is red")  # after the backup: not in it
    await telegram.await_sent(OWNER, 3)
    await app.stop()
    assert not live_check(settings).ok

    fresh = settings.model_copy(update={"data_dir": tmp_path / "fresh"})
    restored = restore_from(fresh, archive)
    assert restored.aside is None  # the fresh data dir held nothing to keep aside
    assert (fresh.data_dir / "workspaces" / f"telegram_{OWNER}" / "notes.txt").read_text() == "tyre pressure 3 bar\n"
    again = await start_bot(data_dir=fresh.data_dir)
    asked = len(models.requests)
    telegram.user_sends(OWNER, "what colour is my bike?")
    await telegram.await_sent(OWNER, 4)
    prompt = json.dumps(models.requests[asked].messages)
    assert "my bike is blue" in prompt and "Noted: a blue bike." in prompt
    assert "my car is red" not in prompt
    await again.stop()


async def test_restore_over_a_used_data_dir_keeps_what_it_replaced_aside(telegram, models, start_bot, tmp_path):
    models.script(Reply(text="hello"))
    app = await start_bot()
    settings = app.settings
    telegram.user_sends(OWNER, "hi")
    await telegram.await_sent(OWNER, 1)
    archive = tmp_path / "backup"  # a folder this time
    backup_to(settings, archive)
    await app.stop()
    (settings.data_dir / "memory").mkdir(exist_ok=True)
    (settings.data_dir / "memory" / "later.md").write_text("written after the backup\n")

    restored = restore_from(settings, archive)

    assert restored.aside is not None and restored.aside.name.startswith("data.before-restore-")
    assert (restored.aside / "memory" / "later.md").read_text() == "written after the backup\n"
    assert (restored.aside / "bicameral.db").exists()
    assert not (settings.data_dir / "memory" / "later.md").exists()
    assert (archive / "manifest.json").exists()  # a folder backup is copied from, never used up
