"""/usage, /cost and /model through the fake Bot API and the scripted model server: the tokens the fake reported,
per model and chat; money from a prices file ("price unknown" without one); switching the model globally and for one
chat, across a restart; and nothing at all for anyone else who sends them."""

from __future__ import annotations

import json

import pytest

from bicameral.events import chat_key
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually, until_sent
from tests.support.console import FRIEND, allowing, everyone_else_tries, nobody_was_answered, texts

OWNER_CHAT, FRIEND_CHAT = chat_key("telegram", OWNER), chat_key("telegram", FRIEND)
# What the fake reports for each person's message: (input, output) tokens.
OWNER_TOKENS, FRIEND_TOKENS = (50_000, 10_000), (100_000, 20_000)


def _by_sender(request: Request) -> Reply:
    text = request.last_user_text()
    usage = FRIEND_TOKENS if "from the friend" in text else OWNER_TOKENS
    return Reply(text=f"answer from {request.model}", usage=usage)


async def ask(telegram: FakeTelegram, chat: int, text: str) -> str:
    """Send `text` to the bot in `chat` and return the next message it sends there."""
    count = len(telegram.sent_messages(chat)) + 1
    telegram.user_sends(chat, text)
    return (await telegram.await_sent(chat, count))[count - 1]["text"]


async def two_chats_talk(telegram: FakeTelegram) -> None:
    assert await ask(telegram, OWNER, "hello from the owner") == "answer from back"
    assert await ask(telegram, FRIEND, "hello from the friend") == "answer from back"


async def test_usage_shows_the_tokens_the_fake_reported_per_model_and_per_chat(telegram, models, start_bot):
    models.responder(_by_sender)
    app = await allowing(start_bot)
    await two_chats_talk(telegram)
    requests = len(models.requests)
    answer = await ask(telegram, OWNER, "/usage")
    today, week = answer.split("This week")
    for period in (today, week):
        assert "• openai:back (single): 150,000 in, 30,000 out, 2 calls" in period
        assert f"• {FRIEND_CHAT}: 100,000 in, 20,000 out, 1 call" in period
        assert f"• {OWNER_CHAT}: 50,000 in, 10,000 out, 1 call" in period
    assert "Today (since 00:00 UTC):" in answer and "This week (since Monday " in answer
    assert len(models.requests) == requests  # answered without a model
    rows = app.stores.db.query("SELECT model, role, chat, outcome FROM model_usage")
    expected = [("openai:back", "single", OWNER_CHAT, "ok"), ("openai:back", "single", FRIEND_CHAT, "ok")]
    assert sorted(tuple(row) for row in rows) == sorted(expected)


async def test_a_failed_call_is_recorded_with_its_kind(telegram, models, start_bot):
    models.responder(lambda request: Reply(error_status=401, error_message="bad key"))
    app = await start_bot(debounce_ms=0, model_max_retries=0)
    telegram.user_sends(OWNER, "hello")
    await telegram.await_sent(OWNER, 1)
    row = await eventually(lambda: app.stores.db.query_one("SELECT outcome, chat FROM model_usage"), "the usage row")
    assert tuple(row) == ("auth", OWNER_CHAT)
    assert app.models.meter.outcomes.lines()[0].startswith("openai:back: 1 call, never answered; last error")
    assert "1 failed" in await ask(telegram, OWNER, "/usage")


async def test_cost_uses_the_prices_file_and_says_price_unknown_without_it(telegram, models, start_bot, make_settings):
    models.responder(_by_sender)
    await allowing(start_bot)
    await two_chats_talk(telegram)
    unknown = await ask(telegram, OWNER, "/cost")
    assert "• openai:back: price unknown (150,000 in, 30,000 out)" in unknown
    assert "Total: $0" in unknown and "Not in the total: openai:back (price unknown)" in unknown
    assert "$0." not in unknown  # no made-up number anywhere

    prices = make_settings().resolved_prices_path
    prices.write_text(json.dumps({"openai:back": {"input": 2, "output": 10}}), encoding="utf-8")
    priced = await ask(telegram, OWNER, "/cost day")
    # 150k input at $2 and 30k output at $10 per million: $0.30 + $0.30.
    assert "• openai:back: $0.6000 (150,000 in, 30,000 out)" in priced
    assert f"• {FRIEND_CHAT}: $0.4000" in priced and f"• {OWNER_CHAT}: $0.2000" in priced
    assert "Total: $0.6000" in priced and "unknown" not in priced
    assert "$0.6000" in await ask(telegram, OWNER, "/cost week")

    prices.write_text('{"openai:back": {"input": 2, "output": "ten"}}', encoding="utf-8")
    broken = await ask(telegram, OWNER, "/cost")
    assert f"Your prices file {prices} was not read: openai:back's output price is 'ten'" in broken
    assert "These are the built-in prices" in broken and "price unknown" in broken
    assert "Say /cost for today" in await ask(telegram, OWNER, "/cost month")


async def test_model_switches_the_back_model_globally_and_per_chat_and_keeps_it_across_a_restart(telegram, models, start_bot):
    models.responder(_by_sender)
    app = await allowing(start_bot)
    switched = await ask(telegram, OWNER, "/model back openai:other")
    assert "openai:other everywhere (it was openai:back)" in switched
    assert await ask(telegram, FRIEND, "hi from the friend") == "answer from other"
    here = await ask(telegram, OWNER, "/model back openai:mine here")
    assert "openai:mine in this chat" in here
    assert await ask(telegram, OWNER, "hi") == "answer from mine"
    assert await ask(telegram, FRIEND, "again from the friend") == "answer from other"  # unchanged
    shown = await ask(telegram, OWNER, "/model")
    assert "openai:other (your choice; configured: openai:back); in this chat: openai:mine" in shown

    await app.stop()
    await allowing(start_bot)
    assert await ask(telegram, OWNER, "after the restart") == "answer from mine"
    assert await ask(telegram, FRIEND, "after the restart, from the friend") == "answer from other"
    assert "in this chat is the one used everywhere again: openai:other" in await ask(telegram, OWNER, "/model back default here")
    assert await ask(telegram, OWNER, "back to the global one") == "answer from other"
    assert "openai:back everywhere again" in await ask(telegram, OWNER, "/model back default")
    assert await ask(telegram, FRIEND, "and now, from the friend") == "answer from back"


async def test_model_refuses_what_it_cannot_use_and_changes_nothing(telegram, models, start_bot):
    models.responder(_by_sender)
    app = await start_bot(debounce_ms=0)
    refusals = {
        "/model back nope:x": "unknown model provider 'nope'",
        "/model back anthropic:claude-sonnet-4-5": "ANTHROPIC_API_KEY",
        "/model back claude-code:sonnet": "executor",
        "/model back openai:": "names no model",
        "/model sideways openai:x": "Say which part",
        "/model back": "Say which part",
    }
    for command, why in refusals.items():
        answer = await ask(telegram, OWNER, command)
        assert why in answer, (command, answer)
        assert answer.startswith(("Not switched", "Say which")), answer
    assert app.stores.kv.get("console.models") is None
    assert await ask(telegram, OWNER, "still there?") == "answer from back"
    assert models.requests[-1].model == "back" and len(models.requests) == 1


async def test_model_front_in_bicameral_mode_and_the_back_task_counted_for_its_chat(telegram, models, start_bot):
    def front(request: Request) -> Reply:
        if "Rephrase the text" in request.system or "Rewrite its result" in request.system:
            return Reply(text="Here it is: done", usage=(10, 2))
        spawn = ToolCall("spawn", {"spec": "Do the thing.", "label": "thing"})
        return Reply(tool_calls=[spawn, ToolCall("reply", {"text": "on it"})], usage=(300, 30))

    models.responder(front, model="front2")
    models.responder(lambda request: Reply(text="done", usage=(700, 70)), model="back2")
    app = await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=0)
    assert "the front model is openai:front2 everywhere" in await ask(telegram, OWNER, "/model front openai:front2")
    assert "the back model is openai:back2 everywhere" in await ask(telegram, OWNER, "/model back openai:back2")
    telegram.user_sends(OWNER, "do the thing")
    await until_sent(telegram, OWNER, "Here it is: done")
    assert {r.model for r in models.requests} == {"front2", "back2"}
    rows = app.stores.db.query("SELECT model, role, chat FROM model_usage WHERE model = 'openai:back2'")
    assert [tuple(row) for row in rows] == [("openai:back2", "back", OWNER_CHAT)]
    usage = await ask(telegram, OWNER, "/usage")
    assert "• openai:back2 (back): 700 in, 70 out, 1 call" in usage
    assert "• openai:front2 (front): " in usage and "(no chat)" not in usage


COMMANDS = ["/usage", "/cost week", "/model back openai:x", "/model back openai:x here", "/cost"]


@pytest.mark.parametrize("where", ["dm", "group"])
async def test_nobody_else_gets_anything_from_usage_cost_or_model(telegram, models, start_bot, where):
    models.responder(lambda request: Reply(text="model answered"))
    app = await allowing(start_bot)
    await everyone_else_tries(telegram, COMMANDS, where)
    assert nobody_was_answered(telegram)
    assert texts(telegram, FRIEND) == ["model answered"]
    assert len(models.requests) == 1 and models.requests[0].model == "back"
    assert app.stores.kv.get("console.models") is None and app.models.choices.chosen("back", FRIEND_CHAT) is None
    assert app.stores.db.query_one("SELECT COUNT(*) FROM model_usage")[0] == 1
