"""A stored inbound's JSON is what dataclasses.asdict would give, and reads back to the same message."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

from bicameral.events import Attachment, AttachmentRef, Inbound, Quoted, Sender
from bicameral.store.messages import inbound_from_json, inbound_to_json

FULL = Inbound(
    channel="telegram",
    chat="telegram:-100",
    message_id="7",
    sender=Sender(id="42", name="Zoë «x»", username="zoe", is_admin=True),
    text="see this\n\u2028 and that",
    ts=1700000000.5,
    chat_type="supergroup",
    chat_title="Team",
    reply_to=Quoted(message_id="6", sender_name="bot", text="earlier", from_bot=True),
    attachments=(Attachment(kind="photo", path="attachments/a.jpg", mime="image/jpeg", size=10, workspace_path="a.jpg"),),
    thread_id="3",
    addressed=False,
    update_id=99,
    media_group_id="g1",
    flags=("truncated", "normalized"),
    row_id=12,
    attachment_refs=(AttachmentRef(kind="document", file_id="f", name="n.pdf", size=3, mime="application/pdf"),),
)


def test_the_json_matches_asdict_without_the_row_id() -> None:
    expected = asdict(FULL)
    expected.pop("row_id")
    assert json.loads(inbound_to_json(FULL)) == json.loads(json.dumps(expected))


def test_a_stored_inbound_reads_back_as_it_was() -> None:
    assert inbound_from_json(inbound_to_json(FULL), row_id=12) == FULL
    bare = replace(FULL, reply_to=None, attachments=(), attachment_refs=(), flags=())
    assert inbound_from_json(inbound_to_json(bare), row_id=12) == bare
