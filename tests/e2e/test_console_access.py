"""The owner's access commands and pairing through the fake Bot API: /access, /allow, /deny, /policy and /pair as the
owner sees them and as access.json changes (a backup kept, a broken file left alone), silence for everyone else who
sends them, and a stranger let in by a one-time code: used once, expired, guessed at (limited, never logged)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

import pytest

from bicameral.app import App
from bicameral.gate.pairing import CODE_VALID_SECONDS, MAX_MISSES, WELCOME, WRONG_CODE
from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually, quiet_for
from tests.support.console import FRIEND, GROUP, STRANGER, allowing, everyone_else_tries, nobody_was_answered, texts

NOON = 1_800_000_000.0


class Clock:
    """A wall clock the test moves by hand: a code expires without a wait."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def start_with_clock(start_bot):
    async def start(clock: Callable[[], float], **overrides) -> App:
        return await start_bot(debounce_ms=0, clock=clock, **overrides)

    return start


async def ask(telegram: FakeTelegram, text: str) -> str:
    """The owner sends a command in our private chat; the answer to it."""
    count = len(telegram.sent_messages(OWNER)) + 1
    telegram.user_sends(OWNER, text)
    return (await telegram.await_sent(OWNER, count))[-1]["text"]


def on_disk(app: App) -> dict:
    return json.loads(app.gate.access.path.read_text())


def backup(app: App) -> dict:
    return json.loads(app.gate.access.backup_path.read_text())


# --- /access, /allow, /deny, /policy ---


async def test_access_shows_the_policy_the_lists_and_the_file(telegram, models, start_bot):
    app = await start_bot(debounce_ms=0)
    shown = await ask(telegram, "/access")
    assert str(app.gate.access.path) in shown
    assert "policy: owner_only" in shown
    assert "allowed users: none" in shown and "allowed chats: none" in shown
    app.gate.access.save(app.gate.access.config.model_copy(update={"policy": "allowlist", "allowed_users": [FRIEND]}))
    shown = await ask(telegram, "/access")
    assert "policy: allowlist" in shown and f"allowed users: {FRIEND}" in shown
    assert models.requests == []


async def test_allow_and_deny_change_the_file_keep_a_backup_and_take_effect(telegram, models, start_bot):
    models.responder(lambda request: Reply(text="hello friend"))
    app = await start_bot(debounce_ms=0)
    said = await ask(telegram, f"/allow {FRIEND}")
    assert said == (
        f"Allowed user {FRIEND}. The policy was owner_only, which doesn't read the lists, so it is allowlist now."
    )
    assert on_disk(app) == {"policy": "allowlist", "allowed_users": [FRIEND], "allowed_chats": []}
    assert backup(app) == {"policy": "owner_only", "allowed_users": [], "allowed_chats": []}
    telegram.user_sends(FRIEND, "hi, may I talk to you now?")
    assert (await telegram.await_sent(FRIEND, 1))[0]["text"] == "hello friend"

    assert await ask(telegram, f"/allow group {GROUP}") == f"Allowed chat {GROUP}."
    assert await ask(telegram, "/allow user @alice:matrix.org") == "Allowed user @alice:matrix.org."
    assert await ask(telegram, "/allow !room:matrix.org") == "Allowed chat !room:matrix.org."
    assert await ask(telegram, f"/allow user {FRIEND}") == f"User {FRIEND} is already allowed."
    assert on_disk(app) == {
        "policy": "allowlist",
        "allowed_users": [FRIEND, "@alice:matrix.org"],
        "allowed_chats": [GROUP, "!room:matrix.org"],
    }
    assert backup(app)["allowed_chats"] == [GROUP]  # the version before the last change

    assert await ask(telegram, f"/deny {FRIEND}") == f"Removed user {FRIEND} from allowed_users."
    assert on_disk(app)["allowed_users"] == ["@alice:matrix.org"]
    assert backup(app)["allowed_users"] == [FRIEND, "@alice:matrix.org"]
    assert await ask(telegram, f"/deny group {GROUP}") == f"Removed chat {GROUP} from allowed_chats."
    assert await ask(telegram, f"/deny {FRIEND}") == f"User {FRIEND} isn't in allowed_users; nothing changed."
    assert await ask(telegram, "/deny group -100999") == "Chat -100999 isn't in allowed_chats; nothing changed."
    assert await ask(telegram, f"/deny {OWNER}") == "That's you: the owner is always allowed, so there is nothing to deny."
    assert await ask(telegram, f"/allow {OWNER}") == "That's you: the owner is always allowed."
    assert on_disk(app) == {"policy": "allowlist", "allowed_users": ["@alice:matrix.org"], "allowed_chats": ["!room:matrix.org"]}

    telegram.user_sends(FRIEND, "still there?")
    refused = await telegram.await_sent(FRIEND, 2)
    assert "private assistant" in refused[1]["text"]  # denied: refused at once, no restart


@pytest.mark.parametrize(
    "command",
    ["/allow", "/allow alice", "/allow user -5", "/allow 12 34", "/allow group @alice:matrix.org", "/deny", "/deny 0"],
)
async def test_a_bad_id_gets_the_usage_and_changes_nothing(telegram, models, start_bot, command):
    app = await start_bot(debounce_ms=0)
    before = app.gate.access.path.read_bytes()
    said = await ask(telegram, command)
    assert said.startswith("Usage: /allow <id>" if command.startswith("/allow") else "Usage: /deny <id>")
    assert app.gate.access.path.read_bytes() == before
    assert not app.gate.access.backup_path.exists()


async def test_policy_sets_who_may_talk(telegram, models, start_bot):
    models.responder(lambda request: Reply(text="hello stranger"))
    app = await start_bot(debounce_ms=0)
    said = await ask(telegram, "/policy open")
    assert said.startswith("Policy: open (was owner_only): anyone, in private and in any group.")
    assert on_disk(app)["policy"] == "open" and backup(app)["policy"] == "owner_only"
    telegram.user_sends(STRANGER, "hello?")
    assert (await telegram.await_sent(STRANGER, 1))[0]["text"] == "hello stranger"
    assert await ask(telegram, "/policy OPEN") == "The policy is already open: anyone, in private and in any group."
    assert await ask(telegram, "/policy everyone") == "Usage: /policy open|owner_only|allowlist"
    assert await ask(telegram, "/policy") == "Usage: /policy open|owner_only|allowlist"
    assert await ask(telegram, "/policy owner_only") == "Policy: owner_only (was open): only you, in private; no groups."
    assert on_disk(app)["policy"] == "owner_only"


BROKEN = '{"policy": "allowlist", "allowed_users": [2002,, ]}'  # an owner half-way through a hand edit


@pytest.mark.parametrize("command", [f"/allow {FRIEND}", f"/deny {FRIEND}", "/policy open"])
async def test_a_broken_access_file_is_left_as_it_was_and_the_owner_is_told(telegram, models, start_bot, command):
    app = await start_bot(debounce_ms=0)
    app.gate.access.path.write_text(BROKEN)
    said = await ask(telegram, command)
    assert said.startswith(f"Nothing changed: {app.gate.access.path} can't be read (not valid JSON")
    assert "Fix the file by hand" in said
    assert app.gate.access.path.read_text() == BROKEN
    assert not app.gate.access.backup_path.exists()
    shown = await ask(telegram, "/access")
    assert "can't be read" in shown and "policy: owner_only" in shown  # the last good policy, still in force
    app.gate.access.path.write_text('{"policy": "allowlist", "allowed_users": [3003], "note": "fixed"}')
    assert await ask(telegram, f"/allow {FRIEND}") == f"Allowed user {FRIEND}."
    assert on_disk(app) == {"policy": "allowlist", "allowed_users": [3003, FRIEND], "allowed_chats": [], "note": "fixed"}


async def test_a_file_that_is_not_the_schema_is_not_overwritten_either(telegram, models, start_bot):
    app = await start_bot(debounce_ms=0)
    wrong = '{"policy": "allowlist", "allowed_users": "everyone"}'
    app.gate.access.path.write_text(wrong)
    said = await ask(telegram, f"/allow {FRIEND}")
    assert said.startswith("Nothing changed:") and "allowed_users" in said
    assert app.gate.access.path.read_text() == wrong


# --- nobody else ---

ACCESS_COMMANDS = [
    "/access", f"/allow {STRANGER}", f"/allow user {STRANGER}", f"/allow group {GROUP - 1}", f"/deny {FRIEND}",
    f"/deny group {GROUP}", "/policy open", "/POLICY open", "/pair", "/pair@bicameral_test_bot", f"/deny@otherbot {FRIEND}",
]


@pytest.mark.parametrize("where", ["dm", "group"])
async def test_nobody_else_gets_anything_from_the_access_commands(telegram, models, start_bot, where):
    models.responder(lambda request: Reply(text="model answered"))
    app = await allowing(start_bot)
    before = app.gate.access.path.read_bytes()
    await everyone_else_tries(telegram, ACCESS_COMMANDS, where)
    assert nobody_was_answered(telegram) and texts(telegram, FRIEND) == ["model answered"]
    assert len(models.requests) == 1
    assert app.gate.access.path.read_bytes() == before
    assert not app.gate.access.backup_path.exists()
    assert app.stores.db.query("SELECT COUNT(*) FROM pairing_codes")[0][0] == 0


# --- pairing ---


def code_in(reply: str) -> str:
    found = re.search(r"Pairing code: ([A-Z2-9]{8})\b", reply)
    assert found, reply
    return found.group(1)


def stored_texts(app: App) -> str:
    """Everything kept of what came in: messages, refusals."""
    rows = app.stores.db.query("SELECT text, payload FROM messages WHERE direction = 'in'")
    refused = app.stores.db.query("SELECT text FROM unauthorized_messages")
    return json.dumps([tuple(r) for r in rows] + [tuple(r) for r in refused])


async def test_a_pairing_code_lets_a_stranger_in_once(telegram, models, start_with_clock):
    models.responder(lambda request: Reply(text="nice to meet you"))
    app = await start_with_clock(Clock())
    reply = await ask(telegram, "/pair")
    code = code_in(reply)
    assert f"/start {code}" in reply and "10 minutes" in reply and "works once" in reply
    telegram.user_sends(STRANGER, f"  {code.lower()} ", first_name="Sam")
    assert (await telegram.await_sent(STRANGER, 1))[0]["text"] == WELCOME
    joined = (await telegram.await_sent(OWNER, 2))[1]["text"]
    assert joined == (
        f"Sam (id {STRANGER}) joined with a pairing code and is in allowed_users now. "
        "The policy was owner_only, which doesn't read allowed_users, so it is allowlist now."
    )
    assert on_disk(app) == {"policy": "allowlist", "allowed_users": [STRANGER], "allowed_chats": []}
    assert backup(app)["policy"] == "owner_only"
    telegram.user_sends(STRANGER, "hello!")
    assert (await telegram.await_sent(STRANGER, 2))[1]["text"] == "nice to meet you"
    assert code not in stored_texts(app) and code.lower() not in stored_texts(app)

    # The same code again, from someone else: used up.
    telegram.user_sends(STRANGER + 1, f"/start {code}")
    assert (await telegram.await_sent(STRANGER + 1, 1))[0]["text"] == WRONG_CODE
    assert on_disk(app)["allowed_users"] == [STRANGER]
    # A second code under allowlist: no word about the policy.
    second = code_in(await ask(telegram, "/pair"))
    telegram.user_sends(STRANGER + 1, f"/start {second}", first_name="Kim", username="kim")
    assert (await telegram.await_sent(STRANGER + 1, 2))[1]["text"] == WELCOME
    joined = (await telegram.await_sent(OWNER, 4))[3]["text"]
    assert joined == f"Kim (@kim, id {STRANGER + 1}) joined with a pairing code and is in allowed_users now."
    assert on_disk(app)["allowed_users"] == [STRANGER, STRANGER + 1]
    assert len(models.requests) == 1  # the codes never reached a model


async def test_a_pairing_code_is_neither_kept_nor_logged(telegram, models, start_with_clock, caplog):
    caplog.set_level(logging.DEBUG)
    app = await start_with_clock(Clock())
    code = code_in(await ask(telegram, "/pair"))
    telegram.user_sends(STRANGER, f"/start {code}")
    await telegram.await_sent(STRANGER, 1)
    kept = json.dumps([tuple(row) for row in app.stores.db.query("SELECT text, payload FROM messages")])
    kept += json.dumps([tuple(row) for row in app.stores.db.query("SELECT action, answers FROM outbox")])
    assert code not in kept and "[a one-time secret: not kept]" in kept
    # Ours: the HTTP libraries' own request lines stay below WARNING in a running assistant (observe/logs.py).
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("bicameral"))
    assert "[TX]" in ours and code not in ours and code.lower() not in ours


async def test_an_expired_code_is_refused(telegram, models, start_with_clock):
    clock = Clock()
    app = await start_with_clock(clock)
    code = code_in(await ask(telegram, "/pair"))
    clock.now += CODE_VALID_SECONDS + 1
    telegram.user_sends(STRANGER, code)
    assert (await telegram.await_sent(STRANGER, 1))[0]["text"] == WRONG_CODE
    assert on_disk(app)["allowed_users"] == [] and on_disk(app)["policy"] == "owner_only"
    assert len(telegram.sent_messages(OWNER)) == 1  # only the code itself


async def test_wrong_guesses_are_limited_and_never_logged(telegram, models, start_with_clock, caplog):
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    app = await start_with_clock(clock)
    code = code_in(await ask(telegram, "/pair"))
    guesses = [f"GUESS{letters}" for letters in ("AAA", "BBB", "CCC", "DDD", "EEE")]
    assert len(guesses) == MAX_MISSES
    for n, guess in enumerate(guesses, start=1):
        telegram.user_sends(STRANGER, guess if n % 2 else f"/start {guess}")
        await telegram.await_sent(STRANGER, n)
    assert texts(telegram, STRANGER) == [WRONG_CODE] * MAX_MISSES
    telegram.user_sends(STRANGER, code)  # out of tries: not even checked, even though it is right
    await quiet_for(1.0, "an answer to the sixth try, or the stranger let in")
    assert texts(telegram, STRANGER) == [WRONG_CODE] * MAX_MISSES
    assert on_disk(app)["allowed_users"] == []
    # Ours, at every level (the Bot API library's own debug lines, which show whole updates, are kept at WARNING
    # and up by observe/logs.py, as are httpx's).
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("bicameral"))
    assert not [guess for guess in guesses if guess in logged or guess.lower() in logged]
    assert f"pairing: a wrong or used-up code from telegram:{STRANGER}" in logged
    assert not [guess for guess in guesses if guess in stored_texts(app)]
    # The right code was not spent on the ignored try: someone else can still use it.
    owner_heard = len(telegram.sent_messages(OWNER))
    telegram.user_sends(FRIEND, code)
    assert (await telegram.await_sent(FRIEND, 1))[0]["text"] == WELCOME
    # The owner is told of the join; wait for it, so it is not taken for the answer to the next /pair.
    assert "joined with a pairing code" in (await telegram.await_sent(OWNER, owner_heard + 1))[-1]["text"]
    # Once the window has passed the stranger may try again.
    clock.now += 601
    again = code_in(await ask(telegram, "/pair"))
    telegram.user_sends(STRANGER, again)
    assert (await telegram.await_sent(STRANGER, MAX_MISSES + 1))[-1]["text"] == WELCOME


async def test_a_code_in_a_group_is_not_redeemed(telegram, models, start_with_clock):
    app = await start_with_clock(Clock())
    code = code_in(await ask(telegram, "/pair"))
    telegram.user_sends(GROUP, code, user_id=STRANGER, chat_type="supergroup", chat_title="Lobby")
    telegram.user_sends(GROUP, f"/start {code}", user_id=STRANGER, chat_type="supergroup", chat_title="Lobby")
    await eventually(lambda: app.stores.unauthorized.count(f"telegram:{GROUP}") == 2, "both group messages refused")
    assert telegram.sent_messages(GROUP) == []
    assert on_disk(app)["allowed_users"] == []
    telegram.user_sends(STRANGER, code)  # the code still works where it belongs
    assert (await telegram.await_sent(STRANGER, 1))[0]["text"] == WELCOME


async def test_pair_in_a_group_gives_no_code(telegram, models, start_with_clock):
    app = await start_with_clock(Clock())
    app.gate.access.save(app.gate.access.config.model_copy(update={"policy": "allowlist", "allowed_chats": [GROUP]}))
    telegram.user_sends(GROUP, "/pair", user_id=OWNER, chat_type="supergroup")
    said = (await telegram.await_sent(GROUP, 1))[0]["text"]
    assert said == "Ask me for a pairing code in our private chat: anyone here could read it."
    assert app.stores.db.query("SELECT COUNT(*) FROM pairing_codes")[0][0] == 0


async def test_a_right_code_while_the_file_is_broken_is_given_back(telegram, models, start_with_clock):
    app = await start_with_clock(Clock())
    code = code_in(await ask(telegram, "/pair"))
    app.gate.access.path.write_text(BROKEN)
    telegram.user_sends(STRANGER, code)
    said = (await telegram.await_sent(STRANGER, 1))[0]["text"]
    assert "can't let you in just now" in said
    told = (await telegram.await_sent(OWNER, 2))[1]["text"]
    assert "can't be read" in told and str(STRANGER) in told
    assert app.gate.access.path.read_text() == BROKEN
    app.gate.access.path.write_text('{"policy": "owner_only"}')
    telegram.user_sends(STRANGER, code)
    assert (await telegram.await_sent(STRANGER, 2))[1]["text"] == WELCOME
    assert on_disk(app)["allowed_users"] == [STRANGER]
