"""The hands end to end: through the fake Telegram server and the scripted model server."""

from __future__ import annotations

from tests.conftest import OWNER
from tests.fakes.model_server import Reply


async def test_a_received_document_lands_in_the_chats_workspace(telegram, models, start_bot):
    models.script(Reply(text="got it"))
    app = await start_bot()
    telegram.user_sends(OWNER, document=("notes.txt", b"remember the milk"), caption="keep these")
    await telegram.await_sent(OWNER, 1)
    copies = list((app.settings.data_dir / "workspaces").glob("*/notes.txt"))
    assert [p.read_bytes() for p in copies] == [b"remember the milk"]
