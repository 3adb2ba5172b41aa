"""A full data disk: the assistant still answers, and the owner is told what to do."""

from __future__ import annotations

import pytest

from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.support.small_disk import fill, small_disk

# By design: the reserve file guards the disk SQLite writes to; PostgreSQL's disk is its server's (store/postgres.py).
pytestmark = pytest.mark.sqlite_only("the disk reserve is SQLite's alone: PostgreSQL's data disk is the server's")


async def test_with_the_data_disk_full_the_owner_is_answered_and_told(telegram, models, start_bot, tmp_path):
    with small_disk(tmp_path / "data", 64) as data:
        models.script(Reply(text="still here"))
        app = await start_bot(disk_reserve_mb=8)
        assert (data / ".reserve").stat().st_size == 8 << 20
        fill(data)  # as a command, a log or anything else on the host might
        telegram.user_sends(OWNER, "are you there?")
        sent = await telegram.await_sent(OWNER, 2, timeout=30)
        texts = [message["text"] for message in sent]
        assert "still here" in texts
        (notice,) = [text for text in texts if "disk" in text]
        assert notice.startswith("The disk that holds my data is nearly full.")
        assert "free some space" in notice
        await app.stop()
