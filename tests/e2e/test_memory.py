"""Memory end to end: facts kept in files, put into prompts, never leaking across chats, really forgotten."""

from __future__ import annotations

import json
import logging
import re

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually

BOT = "@bicameral_test_bot"


def _open_access(make_settings) -> None:
    """Let every user and group talk to the bot (written before start, as an operator would)."""
    path = make_settings().resolved_access_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"policy": "open"}))


def _memory_dir(make_settings):
    return make_settings().data_dir / "memory"


def _seen(req: Request) -> str:
    return json.dumps(req.raw, ensure_ascii=False)


def _group(k: int) -> dict:
    return {"chat_type": "supergroup", "chat_title": f"G{k}"}


async def test_a_fact_survives_a_restart_and_reset_and_is_used_without_being_asked(telegram, models, start_bot, make_settings):
    models.script(
        Reply(tool_calls=[ToolCall("remember", {"text": "Ada is vegetarian", "importance": 0.9, "key": "diet"})]),
        Reply(text="Noted, no meat."),
        Reply(text="Booked the green place."),
    )
    app = await start_bot()
    telegram.user_sends(OWNER, "remember that I'm vegetarian")
    await telegram.await_sent(OWNER, 1)
    assert "remembered [" in models.requests[1].tool_results()[0]["content"]
    await app.stop()
    assert "- Ada is vegetarian <!-- id=" in (_memory_dir(make_settings) / "users" / f"telegram~{OWNER}.md").read_text()

    await start_bot()
    telegram.user_sends(OWNER, "/reset")
    await telegram.await_sent(OWNER, 2)
    telegram.user_sends(OWNER, "book a restaurant for tonight")
    sent = await telegram.await_sent(OWNER, 3)
    assert sent[2]["text"] == "Booked the green place."
    request = models.requests[2]
    assert "remember that I'm vegetarian" not in _seen(request)  # the conversation was reset ...
    assert "Ada is vegetarian" in request.last_user_text()  # ... the memory was not
    assert "Ada is vegetarian" not in request.system  # the system prompt stays the same turn to turn


async def test_facts_never_reach_another_chat_with_many_users_and_groups_at_once(telegram, models, start_bot, make_settings):
    users = [3001 + i for i in range(6)]
    groups = [-100700 - i for i in range(2)]

    def marker(req: Request) -> str:
        found = set(re.findall(r"\[(u\d+|g\d+)\]", json.dumps(req.messages)))
        assert len(found) <= 1, found
        return found.pop() if found else ""

    def respond(req: Request) -> Reply:
        who = marker(req)
        if req.tool_results() or "remember" not in req.last_user_text().split(f"[{who}]")[-1]:
            return Reply(text=f"done {who}", latency=0.2)
        if who.startswith("u"):
            return Reply(tool_calls=[ToolCall("remember", {"text": f"The code word of {who} is kiwi{who[1:]}x"})])
        return Reply(tool_calls=[ToolCall("remember", {"text": f"The code word of {who} is mango{who[1:]}x", "where": "group"})])

    models.responder(respond)
    _open_access(make_settings)
    await start_bot(debounce_ms=100)
    for n, user in enumerate(users):
        telegram.user_sends(user, f"[u{n}] please remember my code word")
    for k, group in enumerate(groups):
        telegram.user_sends(group, f"{BOT} [g{k}] please remember our code word", user_id=users[k], **_group(k))
    for chat in [*users, *groups]:
        await telegram.await_sent(chat, 1, timeout=30)

    asked_from = len(models.requests)
    for n, user in enumerate(users):
        telegram.user_sends(user, f"[u{n}] what is my code word?")
    for k, group in enumerate(groups):
        # Each group is asked by a user whose private fact exists: it must still stay out of the group.
        telegram.user_sends(group, f"{BOT} [g{k}] what is the code word?", user_id=users[k], **_group(k))
    for chat in [*users, *groups]:
        await telegram.await_sent(chat, 2, timeout=30)

    requests = models.requests
    assert all(not r.tool_results() or "error" not in r.tool_results()[0]["content"] for r in requests)
    for req in requests:
        who, seen = marker(req), _seen(req)
        assert who, "every request belongs to one marked chat"
        kiwis = set(re.findall(r"kiwi\d+x", seen))
        mangos = set(re.findall(r"mango\d+x", seen))
        if who.startswith("u"):
            assert kiwis <= {f"kiwi{who[1:]}x"}, (who, kiwis)
            assert not mangos, (who, mangos)
        else:
            assert not kiwis, (who, kiwis)  # a shared group lane never sees anyone's private facts
            assert mangos <= {f"mango{who[1:]}x"}, (who, mangos)
    asked = {marker(r): r for r in requests[asked_from:]}
    for n in range(len(users)):
        assert f"kiwi{n}x" in asked[f"u{n}"].last_user_text()
    for k in range(len(groups)):
        assert f"mango{k}x" in asked[f"g{k}"].last_user_text()


async def test_forget_really_forgets(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("remember", {"text": "Ada's locker code is 4471", "importance": 0.7})]),
        Reply(text="Got it."),
        Reply(tool_calls=[ToolCall("recall", {"query": "locker code"})]),
        Reply(text="I don't know your locker code."),
        Reply(text="Still no idea."),
    )
    await start_bot()
    telegram.user_sends(OWNER, "please keep my locker code in mind, it is the one on the card")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(OWNER, "/memory")
    listing = (await telegram.await_sent(OWNER, 2))[1]["text"]
    fact_id = re.search(r"\[(m[0-9a-f]{8})\] Ada's locker code is 4471", listing).group(1)
    telegram.user_sends(OWNER, f"/forget {fact_id}")
    confirmation = (await telegram.await_sent(OWNER, 3))[2]["text"]
    assert "Forgotten" in confirmation and "4471" in confirmation
    telegram.user_sends(OWNER, "/memory")
    assert "4471" not in (await telegram.await_sent(OWNER, 4))[3]["text"]

    telegram.user_sends(OWNER, "what is my locker code?")
    await telegram.await_sent(OWNER, 5)
    after = models.requests[2:]
    assert "nothing remembered matches" in after[-1].tool_results()[0]["content"]
    assert all("4471" not in _seen(r) for r in after)  # not injected, not recalled, not in the stored conversation

    telegram.user_sends(OWNER, "/reset")
    await telegram.await_sent(OWNER, 6)
    telegram.user_sends(OWNER, "locker code please")
    await telegram.await_sent(OWNER, 7)
    assert "4471" not in _seen(models.requests[-1])


async def test_forget_by_words_in_the_chat_and_other_users_are_untouched(telegram, models, start_bot, make_settings):
    _open_access(make_settings)
    models.script(
        Reply(tool_calls=[ToolCall("remember", {"text": "I am allergic to peanuts", "importance": 1})]),
        Reply(text="Noted."),
        Reply(tool_calls=[ToolCall("remember", {"text": "I am allergic to peanuts", "importance": 1})]),
        Reply(text="Noted too."),
    )
    await start_bot()
    telegram.user_sends(OWNER, "remember my allergy")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(4004, "remember my allergy")
    await telegram.await_sent(4004, 1)
    telegram.user_sends(OWNER, "/forget peanuts")
    assert "Forgotten" in (await telegram.await_sent(OWNER, 2))[1]["text"]
    telegram.user_sends(OWNER, "/forget peanuts")
    assert "nothing to forget" in (await telegram.await_sent(OWNER, 3))[2]["text"]
    telegram.user_sends(OWNER, "/forget")
    assert "Tell me what to forget" in (await telegram.await_sent(OWNER, 4))[3]["text"]
    telegram.user_sends(4004, "/memory")
    assert "I am allergic to peanuts" in (await telegram.await_sent(4004, 2))[1]["text"]


async def test_a_hand_edited_file_is_used_and_a_broken_one_is_skipped(telegram, models, start_bot, make_settings, caplog):
    caplog.set_level(logging.WARNING)
    memory = _memory_dir(make_settings)
    (memory / "notes").mkdir(parents=True)
    (memory / "global.md").write_text("# Office\n\n- The office wifi is called Blue Lagoon\n")
    (memory / "notes" / "broken.md").write_text("---\ntitle: [oops\n---\n- The printer is on floor 3\n")
    (memory / "notes" / "blob.md").write_bytes(b"\x89PNG\x00\x00 wifi wifi")
    models.responder(lambda req: Reply(text="ok"))
    await start_bot()
    telegram.user_sends(OWNER, "what is the wifi called?")
    await telegram.await_sent(OWNER, 1)
    assert "Blue Lagoon" in models.requests[0].last_user_text()

    (memory / "global.md").write_text("# Office\n\n- The office wifi is called Green Lagoon (renamed in May)\n")
    telegram.user_sends(OWNER, "and the wifi now?")
    await telegram.await_sent(OWNER, 2)
    prompt = models.requests[1].last_user_text()
    assert "Green Lagoon" in prompt and "Blue Lagoon" not in prompt
    assert "printer" not in _seen(models.requests[1])
    logged = [r.getMessage() for r in caplog.records]
    assert any("notes/broken.md skipped" in m and "not valid YAML" in m for m in logged)
    assert any("notes/blob.md skipped" in m and "binary" in m for m in logged)

    telegram.user_sends(OWNER, "/memory stats")
    stats = (await telegram.await_sent(OWNER, 3))[2]["text"]
    assert "global: 1 fact" in stats and "notes/broken.md" in stats and "notes/blob.md" in stats


async def test_history_search_finds_the_users_own_messages_across_chats_only(telegram, models, start_bot, make_settings):
    _open_access(make_settings)
    group = -100800
    searches = [
        ToolCall("history_search", {"words": "landlord rent", "since": "2020-01-01"}),
        ToolCall("history_search", {"words": "landlord", "since": "2030-02-01", "until": "2030-01-01"}),
    ]
    asking = "what did I say about the landlord?"
    models.responder(
        lambda req: Reply(tool_calls=searches) if asking in req.last_user_text() and not req.tool_results() else Reply(text="ok")
    )
    await start_bot()
    telegram.user_sends(OWNER, "my landlord wants more rent from March")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(group, f"{BOT} the landlord rent thing again", user_id=OWNER, chat_type="supergroup", chat_title="Flat")
    await telegram.await_sent(group, 1)
    telegram.user_sends(5005, "my landlord rent is secret-elsewhere")
    await telegram.await_sent(5005, 1)
    telegram.user_sends(OWNER, asking)
    await telegram.await_sent(OWNER, 2)
    found, refused = models.requests[-1].tool_results()
    assert "my landlord wants more rent from March" in found["content"]
    assert "the landlord rent thing again" in found["content"] and "telegram:-100800" in found["content"]
    assert "secret-elsewhere" not in found["content"]
    assert "since (2030-02-01) is after until (2030-01-01)" in refused["content"]


async def test_memory_rides_in_the_front_situation_and_the_back_task_in_two_chamber_mode(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Find a restaurant for dinner tonight.", "label": "dinner"}),
                          ToolCall("reply", {"text": "looking"})]),
        model="front",
    )
    models.responder(lambda req: Reply(text="Here you go: " + req.last_user_text()[-80:]), model="front")
    models.script(
        Reply(tool_calls=[ToolCall("remember", {"text": "Ada dislikes loud places", "where": "me", "importance": 0.8})]),
        Reply(text="The Quiet Fork, 19:30."),
        model="back",
    )
    app = await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=100)
    app.stores.memory.remember(f"user:telegram:{OWNER}", "Ada is vegetarian", importance=0.9)
    telegram.user_sends(OWNER, "find me a restaurant for dinner")
    await eventually(lambda: len(models.requests_for("back")) >= 2, "the back task to finish", timeout=15)
    front = models.requests_for("front")[0]
    assert "Ada is vegetarian" in front.last_user_text() and "Ada is vegetarian" not in front.system
    back = models.requests_for("back")
    assert "Ada is vegetarian" in _seen(back[0])
    assert "remembered [" in back[1].tool_results()[0]["content"]
    assert "Ada dislikes loud places" in {f.text for f in app.stores.memory.all([f"user:telegram:{OWNER}"])}


async def test_the_owner_queries_the_database_read_only_and_others_are_refused(telegram, models, start_bot, make_settings):
    _open_access(make_settings)
    query = ToolCall("database_query", {"sql": "SELECT chat, COUNT(*) AS n FROM messages WHERE direction = 'in' GROUP BY chat"})
    hostile = ToolCall("database_query", {"sql": "WITH x AS (DELETE FROM messages RETURNING *) SELECT * FROM x"})
    models.responder(lambda req: Reply(text="ok") if req.tool_results() else Reply(tool_calls=[query, hostile]))
    await start_bot()
    telegram.user_sends(OWNER, "how many messages did each chat send?")
    await telegram.await_sent(OWNER, 1)
    counted, refused = models.requests[-1].tool_results()
    assert f"telegram:{OWNER} | 1" in counted["content"]
    assert "refused: DELETE is not allowed" in refused["content"]
    telegram.user_sends(6006, "and for me?")
    await telegram.await_sent(6006, 1)
    assert "database_query" not in models.requests[-1].tool_names, "an owner-only tool is not even offered to others"
    assert all("only for the owner" in r["content"] for r in models.requests[-1].tool_results())


async def test_the_owner_sets_chat_instructions_that_every_later_turn_follows(telegram, models, start_bot, make_settings):
    _open_access(make_settings)
    write = ToolCall("instructions_write", {"where": "chat", "text": "Answer in German here."})
    learn = ToolCall("record_learning", {"topic": "language", "what_happened": "I answered in English; Ada wants German.",
                                         "proposed_rule": "Check the chat's language instructions first."})
    models.script(Reply(tool_calls=[write, learn]), Reply(text="Alles klar."), Reply(text="Guten Morgen!"))
    await start_bot()
    telegram.user_sends(OWNER, "from now on, answer in German here")
    await telegram.await_sent(OWNER, 1)
    assert [r["content"] for r in models.requests[1].tool_results()] == [
        "chat instructions saved", "learning recorded as [pending] for review"
    ]
    telegram.user_sends(OWNER, "good morning")
    await telegram.await_sent(OWNER, 2)
    prompt = models.requests[2].last_user_text()
    assert "<instructions>" in prompt and "Answer in German here." in prompt
    assert "Answer in German here." not in models.requests[2].system
    learnings = (make_settings().data_dir / "self" / "learnings.md").read_text()
    assert "— language [pending]" in learnings and "**Proposed rule:** Check the chat's language" in learnings

    models.script(Reply(tool_calls=[ToolCall("instructions_write", {"where": "global", "text": "Be rude."})]), Reply(text="no"))
    telegram.user_sends(7007, "set the global instructions to: be rude")
    await telegram.await_sent(7007, 1)
    assert not {"instructions_read", "instructions_write", "instructions_undo"} & set(models.requests[-1].tool_names)
    assert "only for the owner" in models.requests[-1].tool_results()[0]["content"]
    assert "Answer in German" not in _seen(models.requests[-2])  # another chat's instructions stay there


async def test_facts_are_extracted_after_the_reply_without_delaying_it(telegram, models, start_bot, make_settings, caplog):
    caplog.set_level(logging.WARNING)

    def respond(req: Request) -> Reply:
        if "long-term memory" not in req.system:
            return Reply(text="Lovely!")
        if "garbled" in req.last_user_text():
            return Reply(text="I think you like cats?")  # not the facts JSON: logged, nothing kept
        assert "Lovely!" in req.last_user_text()  # extraction sees the reply, so it ran after it
        facts = [{"text": "Ada is vegetarian", "importance": 0.8, "key": "diet", "about": "me"},
                 {"text": "The group meets on Fridays", "about": "group"}]
        return Reply(text=json.dumps({"facts": facts}), latency=0.5)

    models.responder(respond)
    app = await start_bot(memory_extraction=True)
    telegram.user_sends(OWNER, "I'm vegetarian, by the way")
    await telegram.await_sent(OWNER, 1)
    chat_request, extraction = await models.await_requests(2)
    assert extraction.received_at >= chat_request.completed_at
    kept = await eventually(lambda: app.stores.memory.all([f"user:telegram:{OWNER}"]), "the extracted fact", timeout=15)
    assert [(f.text, f.key) for f in kept] == [("Ada is vegetarian", "diet")]
    assert not app.stores.memory.recall("Fridays", [f"chat:telegram:{OWNER}"])  # a DM is no group: not kept

    telegram.user_sends(OWNER, "garbled exchange")
    await telegram.await_sent(OWNER, 2)
    await eventually(lambda: any("fact extraction" in r.getMessage() for r in caplog.records), "the logged failure", timeout=15)
    assert [f.text for f in app.stores.memory.all([f"user:telegram:{OWNER}"])] == ["Ada is vegetarian"]


async def test_in_a_two_chamber_group_each_lane_sees_only_its_own_private_facts(telegram, models, start_bot, make_settings):
    _open_access(make_settings)
    group, ann, ben = -100900, 2101, 2102
    models.responder(lambda req: Reply(tool_calls=[ToolCall("reply", {"text": "noted"})]), model="front")
    app = await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=100)
    memory = app.stores.memory
    memory.remember(f"user:telegram:{ann}", "Ann's badge number is tulip-71")
    memory.remember(f"user:telegram:{ben}", "Ben's badge number is cactus-55")
    memory.remember(f"chat:telegram:{group}", "This team's badge office is room 4")
    memory.remember(f"chat:telegram:{ann}", "planted into a scope no group uses: never-seen-99")
    telegram.user_sends(group, f"{BOT} what is my badge number?", user_id=ann, first_name="Ann", **_group(0))
    telegram.user_sends(group, f"{BOT} what's my badge number, please?", user_id=ben, first_name="Ben", **_group(0))
    await telegram.await_sent(group, 2, timeout=20)
    fronts = models.requests_for("front")
    assert len(fronts) == 2
    ann_req, ben_req = sorted(fronts, key=lambda r: 'from="Ben"' in r.last_user_text())
    assert 'from="Ann"' in ann_req.last_user_text() and 'from="Ben"' in ben_req.last_user_text()
    assert "tulip-71" in ann_req.last_user_text() and "cactus-55" not in _seen(ann_req)
    assert "cactus-55" in ben_req.last_user_text() and "tulip-71" not in _seen(ben_req)
    assert all("room 4" in r.last_user_text() for r in (ann_req, ben_req))
    assert all("never-seen-99" not in _seen(r) for r in fronts)


async def test_a_long_session_is_compacted_after_its_facts_are_flushed_to_memory(telegram, models, start_bot):
    def respond(req: Request) -> Reply:
        if "long-term memory" in req.system:
            locker = {"text": "Ada's locker is number 512", "importance": 0.7, "key": "locker"}
            return Reply(text=json.dumps({"facts": [locker] if "512" in req.last_user_text() else []}))
        if "Summarise the earlier part" in req.system:
            return Reply(text="Earlier, Ada chatted about her week.")
        return Reply(text="ok")

    models.responder(respond)
    app = await start_bot(session_compact_tokens=300)
    padding = " and some more words about the week" * 6
    for turn in range(7):
        opening = "my locker is number 512" if turn == 0 else f"message {turn}"
        telegram.user_sends(OWNER, opening + padding)
        await telegram.await_sent(OWNER, turn + 1)
    systems = [r.system for r in models.requests]
    flush = next(i for i, s in enumerate(systems) if "long-term memory" in s)
    summary = next(i for i, s in enumerate(systems) if "Summarise the earlier part" in s)
    assert flush < summary  # facts first, then the summary
    assert "my locker is number 512" in models.requests[summary].last_user_text()
    last = models.requests[-1]
    assert "<summary of the earlier conversation>" in _seen(last) and "Earlier, Ada chatted" in _seen(last)
    assert "my locker is number 512" not in _seen(last)  # the turn itself is summarised away ...
    assert [f.text for f in app.stores.memory.all([f"user:telegram:{OWNER}"])] == ["Ada's locker is number 512"]
    assert "Ada's locker is number 512" in last.last_user_text()  # ... but the fact still reaches the model


async def test_the_front_extracts_facts_after_answering_in_two_chamber_mode(telegram, models, start_bot):
    def front(req: Request) -> Reply:
        if "long-term memory" in req.system:
            return Reply(text=json.dumps({"facts": [{"text": "Ada's sister Mia was born on 3 May", "key": "sister birthday"}]}))
        return Reply(tool_calls=[ToolCall("reply", {"text": "How lovely!"})])

    models.responder(front, model="front")
    app = await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=100, memory_extraction=True)
    telegram.user_sends(OWNER, "my sister Mia's birthday is on 3 May")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "How lovely!"
    kept = await eventually(lambda: app.stores.memory.all([f"user:telegram:{OWNER}"]), "the extracted fact", timeout=15)
    assert [f.text for f in kept] == ["Ada's sister Mia was born on 3 May"]
    assert models.requests_for("back") == []
