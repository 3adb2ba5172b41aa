"""Internal error text never reaches a chat: the user gets a plain sentence, the log and trace the scrubbed detail."""

from __future__ import annotations

import json
import logging

from pydantic import BaseModel

from bicameral.app import App, telegram_config
from bicameral.channels.telegram import TelegramChannel
from bicameral.failures import failure_sentence
from bicameral.tools.base import Tool, ToolContext, ToolResult
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall

FAKE_KEY = "sk-ant-api03-" + "Q" * 48


def _leak(settings) -> str:
    return f"cannot open {settings.data_dir}/private/notes.db while using key {FAKE_KEY}"


class _CrashingModel:
    """A back model whose client blows up with internals in its message (a bug, not a ModelError)."""

    name = "crashing"

    def __init__(self, message: str) -> None:
        self._message = message

    async def aclose(self) -> None:
        return None

    async def stream(self, system, messages, tools, max_tokens):
        raise RuntimeError(self._message)
        yield  # an async generator, like the real adapters


class _Args(BaseModel):
    pass


def _leaky_tool(message: str) -> Tool:
    class Leaky(Tool):
        name = "read_notes"
        description = "Read the user's notes."
        args_model = _Args

        async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
            raise OSError(message)

    return Leaky()


def _assert_clean(texts: list[str], settings) -> None:
    for text in texts:
        assert FAKE_KEY not in text and "sk-ant" not in text
        assert str(settings.data_dir) not in text
        assert "Error" not in text and "Traceback" not in text


def _scrubbed_detail_logged(caplog) -> bool:
    messages = [r.getMessage() for r in caplog.records]
    assert not any(FAKE_KEY in m for m in messages)
    return any("RuntimeError" in m and "[REDACTED:anthropic_key]" in m for m in messages)


async def test_a_crashing_executor_is_told_as_a_plain_sentence_and_traced_scrubbed(telegram, models, make_settings, caplog):
    caplog.set_level(logging.INFO)
    settings = make_settings(mode="bicameral", delivery_pause_scale=0, debounce_ms=150, task_max_attempts=1)
    models.script(
        Reply(tool_calls=[
            ToolCall("spawn", {"spec": "Summarise my notes.", "label": "notes"}),
            ToolCall("reply", {"text": "on it"}),
        ]),
        model="front",
    )
    async with App(settings, [TelegramChannel(telegram_config(settings))], back_model=_CrashingModel(_leak(settings))) as app:
        telegram.user_sends(OWNER, "summarise my notes")
        sent = await telegram.await_sent(OWNER, 2, timeout=20)
        texts = [m["text"] for m in sent]
        assert texts[0] == "on it"
        assert texts[1] == f"I couldn't finish notes: {failure_sentence('internal')}"
        _assert_clean(texts, settings)
        [task] = app.tasks.for_chat(f"telegram:{OWNER}")
        trace = " ".join(e.data for e in app.tasks.events(task.id))
        assert "RuntimeError" in trace and "[REDACTED:anthropic_key]" in trace and FAKE_KEY not in trace
    assert _scrubbed_detail_logged(caplog)


async def test_a_crashing_turn_in_single_mode_is_told_as_a_plain_sentence(telegram, models, make_settings, caplog):
    caplog.set_level(logging.INFO)
    settings = make_settings()
    async with App(settings, [TelegramChannel(telegram_config(settings))], back_model=_CrashingModel(_leak(settings))):
        telegram.user_sends(OWNER, "summarise my notes")
        sent = await telegram.await_sent(OWNER, 1, timeout=20)
    texts = [m["text"] for m in sent]
    assert texts == [failure_sentence("internal")]
    _assert_clean(texts, settings)
    assert _scrubbed_detail_logged(caplog)


async def test_a_crashing_tool_gives_the_model_no_internals_to_quote(telegram, models, make_settings, start_bot, caplog):
    caplog.set_level(logging.INFO)
    models.script(Reply(tool_calls=[ToolCall("read_notes", {})]), Reply(text="That did not work, sorry."))
    data_dir = make_settings().data_dir  # the same data dir the bot below runs on
    await start_bot(extra_tools=[_leaky_tool(_leak(make_settings()))])
    telegram.user_sends(OWNER, "read my notes")
    await telegram.await_sent(OWNER, 1, timeout=20)
    tool_turn = json.dumps(models.requests[1].raw)
    assert "read_notes failed" in tool_turn
    assert "sk-ant" not in tool_turn and str(data_dir) not in tool_turn
    messages = [r.getMessage() for r in caplog.records]
    assert any("read_notes raised" in m and "[REDACTED:anthropic_key]" in m for m in messages)
    assert not any(FAKE_KEY in m for m in messages)
