"""Nothing said is lost: replies survive a Telegram that refuses them for a while, and restarts between attempts."""

from __future__ import annotations

import asyncio
import logging

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall
from tests.support.chat import eventually

# Quick retries, so ten refusals in a row take about a second.
QUICK = dict(send_retry_base_seconds=0.05, send_retry_cap_seconds=0.2)
LONG_REPLY = "\n\n".join(f"Part {i}: " + ("the findings in some detail, " * 12).strip() for i in range(3))


def _texts(telegram, chat=OWNER) -> list[str]:
    return [m["text"] for m in telegram.sent_messages(chat)]


def _answered_calls(telegram, method: str) -> int:
    return sum(1 for c in telegram.calls_to(method) if c.status is not None)


async def _prove_nothing_else_arrives(telegram, models, start_count: int, model: str | None = None) -> None:
    """A follow-up's reply is the next message: nothing delayed or repeated came in between."""
    models.script(Reply(text="follow-up answer"), model=model)
    telegram.user_sends(OWNER, "one more thing")
    await telegram.await_sent(OWNER, start_count + 1, timeout=20)
    assert _texts(telegram)[start_count:] == ["follow-up answer"]


async def test_a_reply_refused_ten_times_still_arrives_once(telegram, models, start_bot):
    models.script(Reply(text="worth the wait"))
    telegram.fail_next("sendMessage", status=500, times=10)
    app = await start_bot(**QUICK)
    telegram.user_sends(OWNER, "hello")
    await telegram.await_sent(OWNER, 1, timeout=30)
    assert _texts(telegram) == ["worth the wait"]
    # marked right after the send returns
    await eventually(lambda: app.stores.messages.pending_inbound() == [], "the message marked done", timeout=20)
    await _prove_nothing_else_arrives(telegram, models, 1)


async def test_a_rate_limited_reply_waits_out_retry_after_and_arrives(telegram, models, start_bot):
    models.script(Reply(text="slow but sure"))
    telegram.fail_next("sendMessage", status=429, retry_after=1, times=6)
    await start_bot(**QUICK)
    telegram.user_sends(OWNER, "hello")
    await telegram.await_sent(OWNER, 1, timeout=40)
    assert _texts(telegram) == ["slow but sure"]


async def test_a_long_reply_telegram_refuses_between_its_parts_repeats_no_part(telegram, models, start_bot):
    paragraphs = [f"Paragraph {i}: " + ("lorem ipsum dolor sit amet " * 18).strip() for i in range(20)]
    long_text = "\n\n".join(paragraphs)
    models.script(Reply(text=long_text))
    await start_bot(**QUICK)
    telegram.fail_next("sendMessage", status=429, retry_after=1, after=1)  # the second part
    telegram.user_sends(OWNER, "write me a lot")
    await telegram.await_sent(OWNER, 3, timeout=30)
    # every part once, in order
    await eventually(lambda: " ".join(_texts(telegram)).split() == long_text.split(), "every part of the text", timeout=20)
    first, refused, second = telegram.calls_to("sendMessage")[:3]
    assert refused.status == 429 and second.ts - refused.ts >= 0.9
    assert [c.params["text"] for c in telegram.calls_to("sendMessage")].count(first.params["text"]) == 1
    await _prove_nothing_else_arrives(telegram, models, len(_texts(telegram)))


async def test_a_reply_still_unsent_at_shutdown_is_delivered_once_by_the_next_start(telegram, models, start_bot):
    models.script(Reply(text="delivered after the restart"))
    telegram.fail_next("sendMessage", status=502, times=10)
    first = await start_bot(send_retry_base_seconds=0.3, send_retry_cap_seconds=0.3)
    telegram.user_sends(OWNER, "hello")
    await eventually(lambda: _answered_calls(telegram, "sendMessage") >= 2, "two refused sends", timeout=20)
    await first.stop()
    assert _texts(telegram) == []
    await start_bot(**QUICK)
    await telegram.await_sent(OWNER, 1, timeout=30)
    assert _texts(telegram) == ["delivered after the restart"]
    assert len(models.requests) == 1  # the restart did not answer the message again
    await _prove_nothing_else_arrives(telegram, models, 1)


async def test_a_reply_that_never_gets_through_is_given_up_with_a_log_line(telegram, models, start_bot, caplog):
    caplog.set_level(logging.WARNING)
    models.script(Reply(text="lost cause"))
    telegram.fail_next("sendMessage", status=500, times=1000)
    app = await start_bot(send_retry_base_seconds=0.05, send_retry_cap_seconds=0.1, send_give_up_seconds=0.5)
    telegram.user_sends(OWNER, "hello")
    await eventually(
        lambda: any("gave up on message" in r.getMessage() for r in caplog.records), "the give-up logged", timeout=20
    )
    # marked right after the send returns
    await eventually(lambda: app.stores.messages.pending_inbound() == [], "the message marked done", timeout=20)


async def test_an_interim_message_does_not_count_as_the_answer_in_single_mode(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("send_message", {"text": "on it"})]),
        Reply(text="cut off by the crash", latency=30),
        Reply(text="the real answer"),
    )
    first = await start_bot()
    telegram.user_sends(OWNER, "look into it")
    await telegram.await_sent(OWNER, 1)
    await models.await_requests(2)
    await first.stop()
    await start_bot()
    await telegram.await_sent(OWNER, 2, timeout=20)
    assert _texts(telegram) == ["on it", "the real answer"]


async def test_a_restart_between_the_parts_of_a_long_reply_neither_repeats_nor_holds_the_rest(
    telegram, models, start_bot
):
    models.script(Reply(text=LONG_REPLY), model="front")
    settings = dict(mode="bicameral", debounce_ms=150, delivery_pause_scale=1.0)  # part 2 follows 5-11 s after part 1
    first = await start_bot(**settings)
    telegram.user_sends(OWNER, "tell me everything")
    await telegram.await_sent(OWNER, 1, timeout=20)
    # The crash comes between the parts: the turn has recorded them all and ended, part 2 waits its pause.
    await eventually(lambda: not first.conversation.busy_chats(), "the turn to end", timeout=20)
    await first.stop()
    assert len(_texts(telegram)) == 1
    await start_bot(**settings)
    sent = await telegram.await_sent(OWNER, 2, timeout=60)
    texts = [m["text"] for m in sent]
    assert texts[0].startswith("Part 0") and texts[1].startswith("Part 2")
    assert len(models.requests_for("front")) == 1  # the restart did not answer the message again
    await _prove_nothing_else_arrives(telegram, models, 2, model="front")


async def test_a_later_reply_waits_behind_an_earlier_one_still_being_retried(telegram, models, start_bot):
    models.script(Reply(text="first answer"), Reply(text="second answer"))
    telegram.fail_next("sendMessage", status=500, times=3)
    await start_bot(send_retry_base_seconds=0.3, send_retry_cap_seconds=0.3)
    telegram.user_sends(OWNER, "first question")
    await eventually(lambda: _answered_calls(telegram, "sendMessage") >= 1, "the first refused send", timeout=20)
    telegram.user_sends(OWNER, "second question")
    await telegram.await_sent(OWNER, 2, timeout=30)
    assert _texts(telegram) == ["first answer", "second answer"]


async def test_a_send_under_way_at_shutdown_ends_before_the_channel_closes_and_is_not_sent_again(
    telegram, models, start_bot
):
    models.script(Reply(text="just in time"))
    held = telegram.hold("sendMessage", OWNER)  # a slow Telegram: the reply is on the wire when the stop comes
    app = await start_bot(**QUICK)
    telegram.user_sends(OWNER, "hello")
    await eventually(lambda: telegram.calls_to("sendMessage"), "the reply's request at Telegram", timeout=20)
    stopping = asyncio.create_task(app.stop())
    # The outbox stops first and waits for what it has on the wire; only then do the channels close.
    await eventually(lambda: app.outbox.stopped, "the outbox stopping", timeout=20)
    held.set()
    await stopping
    assert [c.status for c in telegram.calls_to("sendMessage")] == [200]
    again = await start_bot(**QUICK)
    assert again.stores.outbox.pending() == []  # recorded as sent: the next start sends nothing
    await _prove_nothing_else_arrives(telegram, models, 1)
