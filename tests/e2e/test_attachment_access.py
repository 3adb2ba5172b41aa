"""Files from senders the gate refuses are never downloaded; admitted senders' files still reach the model."""

from __future__ import annotations

import json

from tests.conftest import OWNER
from tests.fakes.model_server import Reply

STRANGER = 777
STRANGERS_GROUP = -1009999


async def test_a_refused_dm_with_a_document_downloads_nothing(telegram, models, start_bot):
    models.script(Reply(text="pong"))
    app = await start_bot()
    telegram.user_sends(STRANGER, document=("invoice.pdf", b"%PDF-1.4 " + b"x" * 4096), caption="open this")
    notice = await telegram.await_sent(STRANGER, 1)
    assert "private assistant" in notice[0]["text"]
    # Updates pass the gate in order: once the owner is answered, the stranger's file was judged.
    telegram.user_sends(OWNER, "ping")
    await telegram.await_sent(OWNER, 1)
    assert telegram.calls_to("getFile") == []
    assert telegram.calls_to("downloadFile") == []
    assert app.stores.unauthorized.count(f"telegram:{STRANGER}") == 1
    assert not (app.settings.attachments_dir / str(STRANGER)).exists()


async def test_a_refused_group_with_a_photo_downloads_nothing(telegram, models, start_bot):
    models.script(Reply(text="pong"))
    await start_bot()
    telegram.user_sends(
        STRANGERS_GROUP, photo=b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, caption="@bicameral_test_bot look",
        chat_type="supergroup", chat_title="Strangers", user_id=STRANGER,
    )
    telegram.user_sends(OWNER, "ping")
    await telegram.await_sent(OWNER, 1)
    assert telegram.calls_to("getFile") == []
    assert telegram.calls_to("downloadFile") == []


async def test_an_admitted_document_still_reaches_the_model(telegram, models, start_bot):
    models.script(Reply(text="got your notes"))
    app = await start_bot()
    telegram.user_sends(OWNER, document=("notes.txt", b"remember the milk"), caption="keep these")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "got your notes"
    assert len(telegram.calls_to("getFile")) == 1
    request = json.dumps(models.requests[0].raw)
    assert "keep these" in request and "notes.txt" in request
    saved = list((app.settings.attachments_dir / str(OWNER)).iterdir())
    assert [p.read_bytes() for p in saved] == [b"remember the milk"]
