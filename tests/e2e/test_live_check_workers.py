"""`doctor --live` with workers sharing a data dir (PostgreSQL): each host's health check reads its own workers' beat.

A shared heartbeat would keep every host healthy while any worker turns; a hung worker on one host would then never
be restarted by its own health check.
"""

from __future__ import annotations

import os
import socket
import time

from bicameral.app.backups import HEARTBEAT_SECONDS
from bicameral.backup.archive import SKIPPED
from bicameral.backup.lock import HEARTBEAT_NAME, HEARTBEATS_DIR
from bicameral.doctor import live_check
from tests.conftest import OWNER
from tests.fakes.model_server import Reply


async def test_a_workers_host_is_live_by_its_own_beat_not_by_another_hosts(telegram, models, start_bot, postgres_url):
    models.script(Reply(text="hello"))
    app = await start_bot(database_url=postgres_url)
    settings = app.settings
    telegram.user_sends(OWNER, "hi")
    await telegram.await_sent(OWNER, 1)
    ours = settings.data_dir / HEARTBEATS_DIR / socket.gethostname()
    assert ours.is_file()
    live = live_check(settings)
    assert live.ok and f"a worker on this host ({socket.gethostname()})" in live.detail

    # Another host's worker beats, and so does the shared file; this host's loop stopped turning long ago.
    stale = time.time() - 3 * HEARTBEAT_SECONDS - 5
    os.utime(ours, (stale, stale))
    (settings.data_dir / HEARTBEATS_DIR / "another-host").touch()
    (settings.data_dir / HEARTBEAT_NAME).touch()
    hung = live_check(settings)
    assert not hung.ok and "event loop has not turned" in hung.detail
    await app.stop()
    assert HEARTBEATS_DIR in SKIPPED  # never backed up: what a restore would bring back is a stale beat
