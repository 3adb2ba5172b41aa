"""Matrix room events → Inbound: addressing, threads, edits, files, and events with missing or odd fields."""

from __future__ import annotations

import pytest

from bicameral.channels.matrix.actions import relation
from bicameral.channels.matrix.format import markdown_to_matrix_html
from bicameral.channels.matrix.rooms import after_own_join
from bicameral.channels.matrix.translate import Me, Replied, Room, translate

ME = Me("@archie:example.org", "Archie")
DM = Room("!dm:example.org", private=True, title=None, names={"@ann:example.org": "Ann"})
TEAM = Room("!team:example.org", private=False, title="Team", names={"@ann:example.org": "Ann"})


def event(body="hello", *, sender="@ann:example.org", event_id="$e1", **content):
    return {"type": "m.room.message", "event_id": event_id, "sender": sender, "origin_server_ts": 1_700_000_000_000,
            "content": {"msgtype": "m.text", "body": body, **content}}


def test_a_dm_is_addressed_and_keyed_by_its_room():
    inbound = translate(event(), DM, ME)
    assert inbound is not None and inbound.addressed and inbound.is_private
    assert inbound.chat == "matrix:!dm:example.org" and inbound.sender.id == "@ann:example.org"
    assert inbound.sender.name == "Ann" and inbound.thread_id is None and inbound.ts == 1_700_000_000.0


@pytest.mark.parametrize(
    ("body", "extra", "addressed"),
    [
        ("lunch?", {}, False),
        ("@archie:example.org lunch?", {}, True),
        ("archie, lunch?", {}, True),
        ("archived lunch?", {}, False),  # a name inside a word is not the name
        ("Archie lunch?", {"formatted_body": "<script>alert(1)</script> lunch?", "format": "org.matrix.custom.html"}, True),
        ("hey you", {"formatted_body": '<a href="https://matrix.to/#/%40archie%3Aexample.org">you</a>'}, True),
        ("hey you", {"m.mentions": {"user_ids": ["@archie:example.org"]}}, True),
        ("hey you", {"m.mentions": {"user_ids": "not a list"}}, False),
    ],
)
def test_a_room_message_is_addressed_when_it_mentions_the_bot(body, extra, addressed):
    inbound = translate(event(body, **extra), TEAM, ME)
    assert inbound is not None and inbound.addressed is addressed
    assert inbound.text == body  # formatted_body is only searched, never taken as the text


def test_a_rooms_admins_are_vouched_for():
    room = Room("!team:example.org", private=False, title="Team", names={}, admins=frozenset({"@ann:example.org"}))
    assert translate(event(f"{ME.user_id} hi"), room, ME).sender.is_admin
    assert not translate(event(f"{ME.user_id} hi", sender="@bob:example.org"), room, ME).sender.is_admin


def test_a_room_message_is_answered_in_its_own_thread_or_the_thread_it_is_in():
    assert translate(event(f"{ME.user_id} hi"), TEAM, ME).thread_id == "$e1"
    threaded = event("hi", **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}})
    assert translate(threaded, TEAM, ME).thread_id == "$root"


def test_a_message_in_a_thread_we_answered_in_addresses_us():
    threaded = event("and then?", **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}})
    assert translate(threaded, TEAM, ME, our_threads={"$root"}).addressed
    assert not translate(threaded, TEAM, ME, our_threads={"$other"}).addressed
    assert not translate(event("and then?", event_id="$root"), TEAM, ME, our_threads={"$root"}).addressed


def test_a_reply_to_the_bot_addresses_it_and_quotes_it():
    reply = event("and eggs", **{"m.relates_to": {"m.in_reply_to": {"event_id": "$ours"}}})
    inbound = translate(reply, TEAM, ME, Replied("$ours", ME.user_id, "noted"))
    assert inbound.addressed and inbound.reply_to.from_bot and inbound.reply_to.text == "noted"
    other = translate(reply, TEAM, ME, Replied("$theirs", "@bob:example.org", "x"))
    assert not other.addressed and not other.reply_to.from_bot


def test_the_quoted_fallback_of_an_old_client_is_not_the_text():
    body = "> <@bob:example.org> what time?\n> second line\n\nat noon"
    inbound = translate(event(body, **{"m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}}), DM, ME)
    assert inbound.text == "at noon"


def test_an_edit_is_an_edit_of_the_message_it_names():
    edit = event("* fixed", event_id="$e2", **{"m.new_content": {"msgtype": "m.text", "body": "fixed"},
                                                 "m.relates_to": {"rel_type": "m.replace", "event_id": "$e1"}})
    inbound = translate(edit, DM, ME)
    assert inbound.kind == "edit" and inbound.message_id == "$e1" and inbound.text == "fixed"
    assert inbound.update_id != translate(event(), DM, ME).update_id


def test_files_become_references_of_their_kind():
    image = event("cat.png", msgtype="m.image", url="mxc://example.org/abc", info={"mimetype": "image/png", "size": 12})
    inbound = translate(image, DM, ME)
    assert inbound.text == "" and [(r.kind, r.file_id, r.name, r.size) for r in inbound.attachment_refs] == [
        ("photo", "mxc://example.org/abc", "cat.png", 12)]
    voice = translate(event("note.ogg", msgtype="m.audio", url="mxc://example.org/v", info={"size": "big"}), DM, ME)
    assert voice.attachment_refs[0].kind == "voice" and voice.attachment_refs[0].size == 0
    assert translate(event("x", msgtype="m.file", url="https://evil.example/x"), DM, ME) is None  # not mxc: not fetched


@pytest.mark.parametrize(
    "raw",
    [
        None, "text", [], {}, {"type": "m.room.message"},
        {"type": "m.room.message", "event_id": 5, "sender": "@ann:example.org", "content": {"body": "x"}},
        {"type": "m.room.message", "event_id": "$x", "sender": None, "content": {"body": "x", "msgtype": "m.text"}},
        {"type": "m.room.message", "event_id": "$x", "sender": "@ann:example.org", "content": "body"},
        {"type": "m.room.message", "event_id": "$x", "sender": "@ann:example.org", "content": {"msgtype": "m.text"}},
        {"type": "m.room.message", "event_id": "$x", "sender": "@ann:example.org", "content": {"msgtype": 7, "body": "x"}},
        {"type": "m.room.encrypted", "event_id": "$x", "sender": "@ann:example.org", "content": {"ciphertext": "..."}},
        {"type": "m.room.redaction", "event_id": "$x", "sender": "@ann:example.org", "redacts": "$e1", "content": {}},
        event(sender=ME.user_id),  # our own
        event(msgtype="m.notice"),  # another bot's
    ],
)
def test_events_with_missing_or_odd_fields_are_skipped(raw):
    assert translate(raw, DM, ME) is None


def test_a_huge_body_is_passed_whole_to_the_gate_which_caps_it():
    assert len(translate(event("x" * 100_000), DM, ME).text) == 100_000


def test_odd_relations_and_timestamps_do_not_break_a_message():
    odd = event("hi", **{"m.relates_to": {"rel_type": "m.replace", "event_id": 3}, "m.new_content": "nope"})
    odd["origin_server_ts"] = "yesterday"
    inbound = translate(odd, DM, ME)
    assert inbound.kind == "message" and inbound.text == "hi" and inbound.ts > 0


def test_history_before_our_own_join_is_not_ours():
    join = {"type": "m.room.member", "state_key": ME.user_id, "content": {"membership": "join"}}
    rename = {"type": "m.room.member", "state_key": ME.user_id, "content": {"membership": "join"},
              "unsigned": {"prev_content": {"membership": "join"}}}
    events = [event(event_id="$old"), join, event(event_id="$new"), rename, event(event_id="$newer")]
    assert [e.get("event_id") for e in after_own_join(events, ME.user_id)] == ["$new", None, "$newer"]


def test_replies_go_in_the_thread_with_the_fallback_for_clients_without_threads():
    assert relation("$root", None) == {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": "$root"}}
    assert relation("$root", "$msg")["is_falling_back"] is False
    assert relation(None, "$msg") == {"m.in_reply_to": {"event_id": "$msg"}}
    assert relation(None, None) == {}


def test_markdown_becomes_matrix_html_and_raw_html_is_escaped():
    assert markdown_to_matrix_html("**bold** and `code`") == "<strong>bold</strong> and <code>code</code>"
    assert "<script>" not in markdown_to_matrix_html("<script>alert(1)</script>")
    assert "href" not in markdown_to_matrix_html("[x](javascript:alert(1))")
