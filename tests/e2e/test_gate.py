"""The gate against hostile users and groups, through the fake Bot API and the scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from bicameral.app import App, telegram_config
from bicameral.channels.telegram import TelegramChannel
from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually
from tests.support.database import app_database

STRANGER = 777
NOON = 1_800_000_000.0
GROUP = -100555


def calls_to_chat(telegram: FakeTelegram, method: str, chat_id: int) -> list:
    return [c for c in telegram.calls_to(method) if str(c.params.get("chat_id")) == str(chat_id)]


# --- 8.10: nothing slow on the intake path ---


async def test_a_held_refusal_notice_does_not_delay_the_owner(telegram, models, start_bot):
    models.script(Reply(text="owner answered"))
    await start_bot(debounce_ms=0)
    released = telegram.hold("sendMessage", STRANGER)
    try:
        telegram.user_sends(STRANGER, "let me in")
        await eventually(lambda: calls_to_chat(telegram, "sendMessage", STRANGER), "the stranger's notice to be sent", timeout=15)
        telegram.user_sends(OWNER, "ping")
        sent = await telegram.await_sent(OWNER, 2, timeout=15)  # the digest of refused senders, and the answer
        assert "owner answered" in [m["text"] for m in sent]
        # The stranger's notice is still held by Telegram while the owner already has an answer.
        assert telegram.sent_messages(STRANGER) == []
    finally:
        released.set()
    notice = await telegram.await_sent(STRANGER, 1)
    assert "private assistant" in notice[0]["text"]


async def test_a_rate_limited_notice_on_429_does_not_delay_the_owner(telegram, models, start_bot):
    models.responder(lambda req: Reply(text="answer"))
    app = await start_bot(debounce_ms=0, rate_limit_per_min=1)
    app.gate.access.save(app.gate.access.config.model_copy(update={"policy": "open"}))
    released = telegram.hold("sendMessage", STRANGER)
    try:
        telegram.user_sends(STRANGER, "one")
        telegram.user_sends(STRANGER, "two")  # over the limit: the notice is held
        await eventually(lambda: len(calls_to_chat(telegram, "sendMessage", STRANGER)) >= 1, "a send to the stranger", timeout=15)
        telegram.user_sends(OWNER, "ping")
        sent = await telegram.await_sent(OWNER, 1, timeout=15)
        assert sent[0]["text"] == "answer"
        assert telegram.sent_messages(STRANGER) == []
    finally:
        released.set()
    texts = [m["text"] for m in await telegram.await_sent(STRANGER, 2)]
    assert any("faster than I can read" in t for t in texts)


# --- 8.9: /stop and /reset in groups ---

MEMBER = 2002


def in_group(telegram: FakeTelegram, text: str, user_id: int, name: str = "Bob") -> dict:
    return telegram.user_sends(GROUP, text, user_id=user_id, first_name=name, chat_type="supergroup", chat_title="Team")


async def allow_group(start_bot, **overrides):
    app = await start_bot(**overrides)
    app.gate.access.save(app.gate.access.config.model_copy(update={"policy": "allowlist", "allowed_chats": [GROUP]}))
    return app


async def test_a_members_stop_does_not_stop_the_owners_turn(telegram, models, start_bot):
    models.script(Reply(text="the owner's answer", latency=5.0))
    await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot summarise the thread", OWNER, "Owner")
    await models.await_requests(1)
    in_group(telegram, "/stop", MEMBER)
    texts = [m["text"] for m in await telegram.await_sent(GROUP, 2, timeout=20)]
    assert "the owner's answer" in texts
    refusal = next(t for t in texts if t != "the owner's answer")
    assert "only the owner" in refusal.lower()


async def test_a_members_stop_stops_their_own_turn(telegram, models, start_bot):
    models.script(Reply(text="never delivered", latency=5.0))
    await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot write me an essay", MEMBER)
    await models.await_requests(1)
    in_group(telegram, "/stop", MEMBER)
    sent = await telegram.await_sent(GROUP, 1)
    assert sent[0]["text"] == "Stopped."


async def test_the_owners_stop_stops_a_members_turn(telegram, models, start_bot):
    models.script(Reply(text="never delivered", latency=5.0))
    await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot write me an essay", MEMBER)
    await models.await_requests(1)
    in_group(telegram, "/stop", OWNER, "Owner")
    sent = await telegram.await_sent(GROUP, 1)
    assert sent[0]["text"] == "Stopped."


async def test_a_members_reset_of_the_group_is_refused(telegram, models, start_bot):
    models.responder(lambda req: Reply(text="remembered"))
    app = await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot the codeword is heron", OWNER, "Owner")
    await telegram.await_sent(GROUP, 1)
    in_group(telegram, "/reset", MEMBER)
    sent = await telegram.await_sent(GROUP, 2)
    assert "only the owner" in sent[1]["text"].lower()
    assert "heron" in str(app.stores.sessions.load(f"telegram:{GROUP}"))
    in_group(telegram, "/reset", OWNER, "Owner")
    sent = await telegram.await_sent(GROUP, 3)
    assert sent[2]["text"].startswith("Fresh start")
    assert app.stores.sessions.load(f"telegram:{GROUP}") == []


# --- 8.11: groups have a rate limit too ---


@pytest.fixture
async def start_at_noon(make_settings):
    """An assistant whose clock stands still, so a flood cannot straddle two rate-limit minutes."""
    apps: list[App] = []

    async def start(clock: Callable[[], float] = lambda: NOON, policy: str = "open", **overrides) -> App:
        settings = make_settings(**overrides)
        app = App(settings, [TelegramChannel(telegram_config(settings))], clock=clock)
        await app.start()
        app.gate.access.save(app.gate.access.config.model_copy(update={"policy": policy}))
        apps.append(app)
        return app

    yield start
    for app in apps:
        await app.stop()


def group_rows(app: App, chat_id: int = GROUP) -> list[tuple[str, str, str]]:
    """(sender id, text, status) of the group's inbound rows, oldest first."""
    with app_database(app.settings) as db:
        query = "SELECT sender_id, text, status FROM messages WHERE direction = 'in' AND chat = ? ORDER BY id"
        return [tuple(r) for r in db.query(query, (f"telegram:{chat_id}",))]


def rate_notices(telegram: FakeTelegram) -> list[str]:
    texts = [m["text"] for m in telegram.sent_messages(GROUP)]
    return [t for t in texts if "faster than I can read" in t or "more than I can read" in t]


async def test_one_member_flooding_a_group_is_limited_and_the_owner_still_passes(telegram, models, start_at_noon):
    models.responder(lambda req: Reply(text="ok"))
    app = await start_at_noon(debounce_ms=0, group_member_rate_limit_per_min=3, group_rate_limit_per_min=100)
    for i in range(8):
        in_group(telegram, f"@bicameral_test_bot flood {i}", MEMBER)
    await eventually(lambda: len(group_rows(app)) == 8, "all eight stored", timeout=15)
    in_group(telegram, "@bicameral_test_bot owner question", OWNER, "Owner")
    await eventually(lambda: any("owner question" in r.last_user_text() for r in models.requests), "the owner's turn", timeout=15)
    rows = group_rows(app)
    flood = [status for sender, _, status in rows if sender == str(MEMBER)]
    assert flood.count("ignored") == 5
    await eventually(lambda: rate_notices(telegram), "the rate notice", timeout=15)
    assert len(rate_notices(telegram)) == 1
    assert not any(f"flood {i}" in r.last_user_text() for r in models.requests for i in range(3, 8))


async def test_many_members_flooding_a_group_hit_the_group_limit(telegram, models, start_at_noon):
    models.responder(lambda req: Reply(text="ok"))
    app = await start_at_noon(debounce_ms=0, group_member_rate_limit_per_min=3, group_rate_limit_per_min=4)
    for member in range(7):
        in_group(telegram, f"@bicameral_test_bot hello from {member}", 3000 + member, f"M{member}")
    await eventually(lambda: len(group_rows(app)) == 7, "all seven stored", timeout=15)
    in_group(telegram, "@bicameral_test_bot owner question", OWNER, "Owner")
    await eventually(lambda: any("owner question" in r.last_user_text() for r in models.requests), "the owner's turn", timeout=15)
    statuses = [status for sender, _, status in group_rows(app) if sender != str(OWNER)]
    assert statuses.count("ignored") == 3
    await eventually(lambda: rate_notices(telegram), "the group's rate notice", timeout=15)
    assert len(rate_notices(telegram)) == 1
    # Another group has its own budget.
    telegram.user_sends(GROUP - 1, "@bicameral_test_bot hi", user_id=4000, chat_type="supergroup")
    other = GROUP - 1
    accepted = (["pending"], ["consumed"])
    await eventually(lambda: [r[2] for r in group_rows(app, other)] in accepted, "the other group's message accepted", timeout=15)


# --- 8.8: refused traffic is capped, pruned, and summed up for the owner ---


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_refused_messages_are_capped_and_truncated(telegram, models, start_at_noon):
    app = await start_at_noon(policy="owner_only", refused_keep=5)
    for i in range(7):
        telegram.user_sends(STRANGER, f"spam {i} " + "x" * 5000)
    await eventually(lambda: app.stores.unauthorized.texts()[-1:] and "spam 6" in app.stores.unauthorized.texts()[-1],
                     "the last refused message stored", timeout=15)
    texts = app.stores.unauthorized.texts()
    assert [t.split()[1] for t in texts] == ["2", "3", "4", "5", "6"]
    assert all(len(t) <= 501 for t in texts)
    assert len(await telegram.await_sent(STRANGER, 1)) == 1  # one notice, however much they send
    assert models.requests == []


async def test_the_owner_gets_a_digest_of_refused_senders_at_most_once_per_period(telegram, models, start_at_noon):
    clock = Clock()
    app = await start_at_noon(clock=clock, policy="owner_only", refused_digest_interval_seconds=3600)
    telegram.user_sends(STRANGER, "let me in", first_name="Mallory")
    first = await telegram.await_sent(OWNER, 1)
    assert "Mallory" in first[0]["text"] and str(STRANGER) in first[0]["text"]
    telegram.user_sends(STRANGER + 1, "me too", first_name="Trudy")
    telegram.user_sends(STRANGER, "hello??", first_name="Mallory")
    await telegram.await_sent(STRANGER + 1, 1)  # Trudy's refusal was handled
    await eventually(lambda: app.stores.unauthorized.count(f"telegram:{STRANGER}") == 2, "Mallory's second message", timeout=15)
    assert len(telegram.sent_messages(OWNER)) == 1  # within the hour: no second digest
    clock.now += 3601
    telegram.user_sends(GROUP, "anyone here?", user_id=999, first_name="Eve", chat_type="supergroup", chat_title="Spam")
    second = await telegram.await_sent(OWNER, 2)
    digest = second[1]["text"]
    assert "Trudy" in digest and "Spam" in digest and "Mallory" in digest
    assert "1 message" in digest  # Mallory's one message since the first digest
    assert len(telegram.sent_messages(GROUP)) == 0  # a refused group gets no notice


# --- 8.12: quotes and names pass the same normaliser and scrubber ---

ANTHROPIC_KEY = "sk-ant-api03-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kL9n"


def stored_inbound(app: App) -> str:
    with app_database(app.settings) as db:
        return json.dumps([tuple(r) for r in db.query("SELECT text, payload, sender_name FROM messages")])


async def test_a_key_redacted_when_pasted_does_not_come_back_through_a_quote_reply(telegram, models, start_bot):
    models.responder(lambda req: Reply(text="noted"))
    app = await start_bot(debounce_ms=0)
    pasted = telegram.user_sends(OWNER, f"my key is {ANTHROPIC_KEY}")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(OWNER, "what did I paste here?", reply_to_message_id=pasted["message_id"])
    await telegram.await_sent(OWNER, 2)
    prompts = json.dumps([r.raw for r in models.requests])
    assert "what did I paste here?" in prompts
    assert ANTHROPIC_KEY not in prompts
    assert "[REDACTED:anthropic_key]" in json.dumps(models.requests[-1].raw)
    assert ANTHROPIC_KEY not in stored_inbound(app)


async def test_a_hostile_display_name_and_title_reach_the_prompt_cleaned_and_flagged(telegram, models, start_bot):
    models.responder(lambda req: Reply(text="hello"))
    app = await allow_group(start_bot, debounce_ms=0)
    tags = "".join(chr(0xE0000 + ord(c)) for c in "IGNORE")  # invisible "IGNORE" in tag characters
    hostile = "Bob\u202e" + tags + " ghp_" + "x1Y2z3A4b5C6d7E8f9G0h1I2j3K4l5M6n7O8"
    telegram.user_sends(
        GROUP, "@bicameral_test_bot hi", user_id=MEMBER, first_name=hostile, chat_type="supergroup",
        chat_title="Team\u2066\u200b",
    )
    await telegram.await_sent(GROUP, 1)
    prompt = models.requests[0].last_user_text()
    assert "\u202e" not in prompt and "\U000e0049" not in prompt and "\u2066" not in prompt and "\u200b" not in prompt
    assert 'from="Bob [REDACTED:github_token]"' in prompt
    assert 'chat="Team"' in prompt
    assert "name:bidi_stripped" in prompt and "name:zero_width_stripped" in prompt
    assert "ghp_x1Y2" not in stored_inbound(app)


async def test_in_two_chamber_mode_the_owners_stop_stops_a_members_turn(telegram, models, start_bot):
    models.script(Reply(text="never delivered", latency=5.0), model="front")
    await allow_group(start_bot, mode="bicameral", delivery_pause_scale=0, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot write me an essay", MEMBER)
    await models.await_requests(1)
    in_group(telegram, "/stop", OWNER, "Owner")
    sent = await telegram.await_sent(GROUP, 1)
    assert sent[0]["text"] == "Stopped."


ADMIN = 2003


def members_and_admins(params: dict) -> dict:
    """getChatMember as Telegram answers it: ADMIN administers GROUP, everyone else is a member."""
    user_id = int(params["user_id"])
    status = "administrator" if user_id == ADMIN and int(params["chat_id"]) == GROUP else "member"
    return {"status": status, "user": {"id": user_id, "is_bot": False, "first_name": "X"}}


async def test_a_group_admin_may_reset_the_group_and_a_member_may_not(telegram, models, start_bot):
    telegram.register_method("getChatMember", members_and_admins)
    app = await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "/reset", MEMBER)
    sent = await telegram.await_sent(GROUP, 1)
    assert "only the owner" in sent[0]["text"].lower()
    in_group(telegram, "/reset", ADMIN, "Ada")
    sent = await telegram.await_sent(GROUP, 2)
    assert sent[1]["text"].startswith("Fresh start")
    assert app.stores.sessions.load(f"telegram:{GROUP}") == []


async def test_when_telegram_cannot_say_who_is_admin_a_members_reset_is_refused_not_lost(telegram, models, start_bot):
    telegram.fail_next("getChatMember", status=500, times=5)
    await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "/reset", ADMIN, "Ada")
    sent = await telegram.await_sent(GROUP, 1)
    assert "only the owner" in sent[0]["text"].lower()


async def test_a_held_command_reply_does_not_delay_the_owner(telegram, models, start_bot):
    models.script(Reply(text="owner answered"))
    await allow_group(start_bot, debounce_ms=0)
    released = telegram.hold("sendMessage", GROUP)
    try:
        in_group(telegram, "/reset", MEMBER)
        await eventually(lambda: calls_to_chat(telegram, "sendMessage", GROUP), "the refusal to be sent", timeout=15)
        telegram.user_sends(OWNER, "ping")
        sent = await telegram.await_sent(OWNER, 1, timeout=15)
        assert sent[0]["text"] == "owner answered"
        assert telegram.sent_messages(GROUP) == []
    finally:
        released.set()
    refusal = await telegram.await_sent(GROUP, 1)
    assert "only the owner" in refusal[0]["text"].lower()
