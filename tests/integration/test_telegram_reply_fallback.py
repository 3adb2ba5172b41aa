"""A reply target Telegram refuses costs the quote, never the message: sent again once without the reply."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bicameral.app import telegram_config
from bicameral.channels.telegram import TelegramChannel
from bicameral.config import Settings
from bicameral.events import SendFile, SendText
from tests.fakes.telegram_server import FakeTelegram

GROUP = -1004477
CHAT = f"telegram:{GROUP}"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (64).to_bytes(4, "big") + (48).to_bytes(4, "big") + b"rest-of-png"


async def _no_sleep(delay: float) -> None:
    await asyncio.sleep(0)


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(bot_username="bicameral_test_bot").start()
    server.refuse_unseen_reply_targets()
    yield server
    server.stop()
    assert server.errors == []


@pytest.fixture
def settings(tmp_path: Path, fake: FakeTelegram) -> Settings:
    return Settings.for_test(tmp_path, telegram_token=fake.token, telegram_api_url=fake.url, telegram_poll_timeout=1)


@pytest.fixture
async def channel(settings: Settings):
    ch = TelegramChannel(telegram_config(settings), sleep=_no_sleep)
    yield ch
    await ch.stop()


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "sending without the reply" in r.getMessage()]


def test_the_fake_refuses_only_targets_it_never_saw(fake: FakeTelegram) -> None:
    """The scripted refusal is Telegram's own: 400 "message to be replied not found"; a deleted message still passes."""

    asked = fake.user_sends(GROUP, "hello", user_id=7, chat_type="supergroup")

    def call(method: str, params: dict) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"{fake.url}/bot{fake.token}/{method}", json.dumps(params).encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    def reply(to: int) -> tuple[int, dict]:
        target = {"message_id": to, "allow_sending_without_reply": True}
        return call("sendMessage", {"chat_id": GROUP, "text": "x", "reply_parameters": target})

    status, answer = reply(9999)
    assert (status, answer["description"]) == (400, "Bad Request: message to be replied not found")
    assert reply(asked["message_id"])[0] == 200
    assert call("deleteMessage", {"chat_id": GROUP, "message_id": asked["message_id"]})[0] == 200
    status, answer = reply(asked["message_id"])
    assert status == 200 and "reply_to_message" not in answer["result"], "a deleted referent is let through"


async def test_a_refused_reply_target_still_delivers_the_message_once_without_the_reply(
    fake: FakeTelegram, channel: TelegramChannel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    result = await channel.perform(SendText(CHAT, "the answer", reply_to="9999"))
    assert result.ok, result.error
    [sent] = fake.sent_messages(GROUP)
    assert sent["text"] == "the answer" and "reply_to_message" not in sent
    assert [c.status for c in fake.calls_to("sendMessage")] == [400, 200], "refused once, then sent once without it"
    assert "reply_parameters" not in fake.calls_to("sendMessage")[1].params
    assert result.message_ids == (str(sent["message_id"]),)
    [logged] = _refusals(caplog)
    assert "9999" in logged and "message to be replied not found" in logged.lower()


async def test_a_target_telegram_knows_is_replied_to_at_the_first_attempt(
    fake: FakeTelegram, channel: TelegramChannel, caplog: pytest.LogCaptureFixture
) -> None:
    asked = fake.user_sends(GROUP, "what's new?", user_id=7, chat_type="supergroup")
    result = await channel.perform(SendText(CHAT, "the answer", reply_to=str(asked["message_id"])))
    assert result.ok, result.error
    [sent] = fake.sent_messages(GROUP)
    assert sent["reply_to_message"]["message_id"] == asked["message_id"]
    assert len(fake.calls_to("sendMessage")) == 1 and _refusals(caplog) == []


async def test_an_id_telegram_could_never_know_is_dropped_before_sending(
    fake: FakeTelegram, channel: TelegramChannel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    result = await channel.perform(SendText(CHAT, "the answer", reply_to="schedule-1-fire-1"))
    assert result.ok, result.error
    [call] = fake.calls_to("sendMessage")
    assert call.status == 200 and "reply_parameters" not in call.params
    assert [m["text"] for m in fake.sent_messages(GROUP)] == ["the answer"]
    [logged] = _refusals(caplog)
    assert "schedule-1-fire-1" in logged


async def test_a_long_answer_whose_reply_is_refused_arrives_whole_and_in_order(
    fake: FakeTelegram, channel: TelegramChannel
) -> None:
    text = "\n\n".join(f"Part {i}: " + "the service answered slowly under load. " * 40 for i in range(6))
    result = await channel.perform(SendText(CHAT, text, reply_to="9999"))
    assert result.ok, result.error
    sent = fake.sent_messages(GROUP)
    assert len(sent) >= 2 and all("reply_to_message" not in m for m in sent)
    assert "Part 0" in sent[0]["text"] and "Part 5" in sent[-1]["text"]
    assert [c.status for c in fake.calls_to("sendMessage")] == [400] + [200] * len(sent)


async def test_refused_markup_and_a_refused_reply_together_still_deliver_once(
    fake: FakeTelegram, channel: TelegramChannel
) -> None:
    fake.reject_entities_next()
    result = await channel.perform(SendText(CHAT, "**the** answer", reply_to="9999"))
    assert result.ok, result.error
    [sent] = fake.sent_messages(GROUP)
    assert sent["text"] == "the answer" and "reply_to_message" not in sent


async def test_other_refusals_are_not_retried_without_the_reply(fake: FakeTelegram, channel: TelegramChannel) -> None:
    fake.fail_next("sendMessage", status=400, description="Bad Request: not enough rights to send text messages")
    result = await channel.perform(SendText(CHAT, "the answer", reply_to="9999"))
    assert not result.ok and "not enough rights" in (result.error or "").lower()
    assert len(fake.calls_to("sendMessage")) == 1 and fake.sent_messages(GROUP) == []


@pytest.mark.parametrize("kind", ["document", "photo"])
async def test_a_file_whose_reply_is_refused_is_sent_once_without_it(
    fake: FakeTelegram, channel: TelegramChannel, settings: Settings, kind: str
) -> None:
    (settings.data_dir / "out").mkdir(parents=True)
    (settings.data_dir / "out" / "chart.png").write_bytes(PNG)
    result = await channel.perform(SendFile(CHAT, "out/chart.png", kind=kind, caption="the chart", reply_to="9999"))
    assert result.ok, result.error
    method = "sendPhoto" if kind == "photo" else "sendDocument"
    [sent] = fake.sent_messages(GROUP)
    assert sent["method"] == method and sent["caption"] == "the chart" and "reply_to_message" not in sent
    assert [c.status for c in fake.calls_to(method)] == [400, 200]
