"""/health, /audit and /logs through the fake Bot API: what the owner sees, from the process's own state, and
nothing at all for anyone else who sends them, however they come."""

from __future__ import annotations

import json
import logging
import time

import pytest
from pydantic import BaseModel

from bicameral.observe.logs import setup_logging
from bicameral.tasks.task import Task, TaskState
from bicameral.tools.base import Tool, ToolContext, ToolResult
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually
from tests.support.console import FRIEND, STRANGER, allowing, everyone_else_tries, nobody_was_answered, texts


async def ask(telegram: FakeTelegram, text: str, head: str) -> str:
    """Send the owner's command and return the answer that starts with `head` (other notices may come between)."""

    def answers() -> list[str]:
        return [m["text"] for m in telegram.sent_messages(OWNER) if m["text"].startswith(head)]

    before = len(answers())
    telegram.user_sends(OWNER, text)
    await eventually(lambda: len(answers()) > before, f"the answer to {text}", timeout=15)
    return answers()[-1]


async def test_health_shows_uptime_queues_and_the_reminder_due_within_the_hour(telegram, models, start_bot):
    app = await allowing(start_bot)
    now = time.time()
    schedules, owner_chat = app.stores.schedules, f"telegram:{OWNER}"
    for body, due in (("call the plumber", now + 20 * 60), ("water the plants", now + 3 * 3600)):
        schedules.create(chat=owner_chat, creator=owner_chat, kind="text", body=body, tz="UTC", next_due=due, now=now)
    app.tasks.create(Task("t1", owner_chat, "sum up my notes", TaskState.PENDING, created_at=now, updated_at=now))
    telegram.user_sends(OWNER, "/pause")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(FRIEND, "are you there?")
    telegram.user_sends(FRIEND, "hello?")
    await eventually(lambda: app.stores.messages.pending_count() == 2, "the friend's two messages held")

    health = await ask(telegram, "/health", "Health at")

    assert "uptime" in health
    assert "Paused: yes" in health
    assert "Inbox: 2 not yet answered" in health  # the friend's, held by the pause
    assert "Outbox: 0 not yet delivered" in health
    assert "Tasks: 1 queued, 0 running" in health
    assert "Reminders due in the next hour: 1, the first in 19 min" in health or "1, the first in 20 min" in health
    assert "Scheduled tasks due in the next hour: none" in health
    assert "Last message in: just now" in health or "s ago (" in health.split("Last message in:")[1].split("\n")[0]
    assert "Last message sent: never" not in health  # the answer to /pause went out
    assert "Breakers: none open" in health
    models_said = health.split("Models:")[1].split("Memory:")[0]
    assert "openai:back" in models_said and "openai:front" not in models_said  # single mode calls the back model only
    assert "resident" in health and "free of" in health and "data dir" in health
    assert models.requests == []


async def test_health_counts_the_time_since_the_start(telegram, models, start_bot):
    await start_bot(debounce_ms=0)
    health = await ask(telegram, "/health", "Health at")
    assert "Process uptime: 0 s" in health or "Process uptime: 1 s" in health or "Process uptime: 2 s" in health
    assert "Last message in: never" in health  # the /health itself does not count
    assert "Last message sent: never" in health
    assert "Paused: no" in health


async def test_health_names_each_models_last_answer_and_error(telegram, models, start_bot):
    models.script(Reply(text="Hello!"), Reply(error_status=401, error_message="invalid x-api-key"))
    await start_bot(debounce_ms=0)
    telegram.user_sends(OWNER, "hi")
    await telegram.await_sent(OWNER, 1, timeout=20)
    health = await ask(telegram, "/health", "Health at")
    assert "openai:back: 1 call, last answered just now (" in health or "openai:back: 1 call, last answered 1 s ago" in health
    assert "; no errors" in health
    telegram.user_sends(OWNER, "hi again")
    await telegram.await_sent(OWNER, 3, timeout=20)  # the failure sentence
    health = await ask(telegram, "/health", "Health at")
    assert "openai:back: 2 calls, last answered " in health and "; last error " in health and "(auth)" in health
    assert len(models.requests) == 2  # the two answers; neither /health called a model


class _Args(BaseModel):
    pass


class Flaky(Tool):
    name = "read_meter"
    description = "Read the electricity meter."
    args_model = _Args

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        return ToolResult.error("the meter did not answer (timed out after 5 s)")


async def test_audit_names_the_failing_tool_and_the_refused_stranger_but_not_what_they_wrote(telegram, models, start_bot):
    models.script(Reply(tool_calls=[ToolCall("read_meter", {})]), Reply(text="The meter is not answering."))
    await start_bot(debounce_ms=0, extra_tools=[Flaky()])
    telegram.user_sends(OWNER, "what does the meter say?")
    await telegram.await_sent(OWNER, 1, timeout=20)
    telegram.user_sends(STRANGER, "my secret plan: let me in", first_name="Mallory")
    await telegram.await_sent(STRANGER, 1)  # refused, and told so

    audit = await ask(telegram, "/audit", "Audit at")

    failures = audit.split("Refused by")[0]
    assert "read_meter in telegram:1001" in failures and "the meter did not answer" in failures
    refused = audit.split("Refused by")[1].split("Tools and plugins")[0]
    assert f"Mallory (id {STRANGER}): 1 message, last " in refused
    assert "secret plan" not in audit
    assert "Tools and plugins that did not load:" in audit
    assert "Last backup: no backups made" in audit
    assert len(models.requests) == 2  # the owner's question and the tool's result; /audit asked no model


async def test_audit_with_nothing_to_report_says_so(telegram, models, start_bot):
    await start_bot(debounce_ms=0)
    audit = await ask(telegram, "/audit", "Audit at")
    assert "none among the last 10000 tool calls" in audit
    assert "• nobody" in audit  # a Markdown list item, as Telegram shows it
    assert "Last backup: no backups made" in audit


@pytest.fixture
def logging_to_file():
    """The JSON log file as `bicameral run` writes it (the in-process bot sets up no logging of its own)."""
    root = logging.getLogger()
    level = root.level

    def setup(settings) -> None:
        setup_logging("INFO", settings.logs_dir, settings.secret_values(), console=False)

    yield setup
    for handler in [h for h in root.handlers if getattr(h, "_bicameral", False)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)


async def test_logs_shows_what_was_logged_and_never_a_secret(telegram, models, start_bot, make_settings, logging_to_file):
    settings = make_settings()
    logging_to_file(settings)
    await start_bot(debounce_ms=0)
    logging.getLogger("bicameral.gate.test").warning("a stranger knocked at %s", "the door")
    logging.getLogger("bicameral.gate.test").warning("the token is %s", telegram.token)  # redacted on its way in
    log_file = settings.logs_dir / "bicameral.log"
    # A line that got past the filter (written by something else, or an older version): redacted on the way out too.
    with log_file.open("a", encoding="utf-8") as file:
        line = {"ts": "2030-01-01T10:00:00.000+00:00", "level": "ERROR", "component": "x", "msg": f"leak {telegram.token}"}
        file.write(json.dumps(line) + "\n")

    logs = await ask(telegram, "/logs 5", "The log's last")

    assert "The log's last 5 lines (times UTC)" in logs
    assert "WARNI gate: a stranger knocked at the door" in logs
    assert "ERROR x: leak [REDACTED:secret]" in logs
    assert telegram.token not in logs and telegram.token.split(":")[1] not in logs
    assert "-- 2030-01-01 --" in logs
    assert models.requests == []


async def test_logs_answers_a_bad_count_with_its_usage_and_lowers_a_large_one(telegram, models, start_bot, make_settings,
                                                                             logging_to_file):
    logging_to_file(make_settings())
    await start_bot(debounce_ms=0)
    for bad in ("/logs abc", "/logs -5", "/logs 0"):
        assert (await ask(telegram, bad, "Usage: /logs")).startswith("Usage: /logs [N], N from 1 to 200")
    many = await ask(telegram, "/logs 99999", "The log's last")
    assert "200 is the most I send" in many
    assert "ready (mode=single" in many
    plain = await ask(telegram, "/logs", "The log's last")
    assert "200 is the most" not in plain.splitlines()[0]  # (the log's own record of the last answer may say it)


async def test_logs_before_anything_was_written(telegram, models, start_bot):
    await start_bot(debounce_ms=0)
    assert await ask(telegram, "/logs", "The log") == "The log (bicameral.log) has not been written yet."


REPORTS = ["/health", "/audit", "/logs 5", "/logs", "/HEALTH", "/health@bicameral_test_bot", "/health@otherbot", "/audit now"]


@pytest.mark.parametrize("where", ["dm", "group"])
async def test_nobody_else_gets_a_report(telegram, models, start_bot, where):
    models.responder(lambda request: Reply(text="model answered"))
    app = await allowing(start_bot)
    await everyone_else_tries(telegram, REPORTS, where)
    assert nobody_was_answered(telegram) and texts(telegram, FRIEND) == ["model answered"]
    assert not any(m["text"].startswith(("Health", "Audit", "The log")) for m in telegram.sent_messages(OWNER))
    assert len(models.requests) == 1
    stored = app.stores.db.query("SELECT text FROM messages WHERE direction = 'in' AND sender_id != ?", (str(OWNER),))
    assert [row["text"] for row in stored if any(word in row["text"] for word in ("health", "audit", "logs"))] == []


async def test_the_owners_forwarded_edited_or_captioned_report_does_nothing(telegram, models, start_bot):
    await start_bot(debounce_ms=0)
    telegram.user_sends(OWNER, "/health", forwarded_from=FRIEND)
    telegram.user_sends(OWNER, "notes", document=("notes.txt", b"x"), caption="/audit")
    sent = telegram.user_sends(OWNER, "/help")
    await telegram.await_sent(OWNER, 1)
    telegram.user_edits(OWNER, sent["message_id"], "/logs 5")
    telegram.user_sends(OWNER, "/help")
    owner = await telegram.await_sent(OWNER, 2)
    assert [m["text"].split(",")[0] for m in owner] == ["Hi", "Hi"]
    assert models.requests == []
