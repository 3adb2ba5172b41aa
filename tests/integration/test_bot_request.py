"""PTB's Bot over BotRequest (the httpx transport without its client): the bodies on the wire, and PTB's errors for
failures."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from telegram import Bot
from telegram.error import NetworkError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from bicameral.channels.telegram.request import BotRequest
from tests.fakes.telegram_server import FakeTelegram

TOKEN = "123456:" + "A" * 35


def _request(**timeouts: float) -> BotRequest:
    values = {"connect_timeout": 5.0, "read_timeout": 5.0, "write_timeout": 5.0, "media_write_timeout": 5.0} | timeouts
    return BotRequest(connections=4, **values)


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A server that accepts connections and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    for writer in held:
        writer.close()
    server.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_typed_calls_form_bodies_and_uploads_reach_the_fake_bot_api() -> None:
    fake = FakeTelegram(bot_username="wire_bot").start()
    try:
        request = _request()
        bot = Bot(fake.token, base_url=f"{fake.url}/bot", base_file_url=f"{fake.url}/file/bot", request=request)
        async with bot:
            assert bot.username == "wire_bot"
            sent = await bot.send_message(4242, "hi <b>there</b>", parse_mode="HTML")
            assert sent.text == "hi there"
            document = await bot.send_document(4242, b"line one\r\n--boundary-ish\r\n\x00\xff", filename='odd "name".txt')
            assert document.document is not None and document.document.file_name is not None
        stored = fake.sent_messages(4242)
        assert stored[0]["params"]["parse_mode"] == "HTML"
        assert stored[1]["file_bytes"] == b"line one\r\n--boundary-ish\r\n\x00\xff"
        assert fake.errors == []
    finally:
        fake.stop()


async def test_a_refused_connection_is_a_network_error_without_the_token() -> None:
    bot = Bot(TOKEN, base_url=f"http://127.0.0.1:{_closed_port()}/bot", request=_request())
    with pytest.raises(NetworkError) as caught:
        await bot.get_me()
    assert not isinstance(caught.value, TimedOut)
    assert "ConnectError" in caught.value.message and TOKEN not in caught.value.message


async def test_a_silent_server_is_timed_out_at_the_read_timeout_ptb_passes(silent_port: int) -> None:
    request = _request(read_timeout=60.0)
    data = RequestData([RequestParameter.from_input("timeout", 0)])
    with pytest.raises(TimedOut) as caught:
        await request.post(f"http://127.0.0.1:{silent_port}/bot{TOKEN}/getUpdates", request_data=data, read_timeout=0.2)
    assert "0.2s" in caught.value.message


async def test_the_bodies_are_what_the_httpx_layer_would_send() -> None:
    seen: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        seen.append(head + await reader.readexactly(length))
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 26\r\n\r\n{"ok":true,"result":true} ')
        await writer.drain()

    server = await asyncio.start_server(record, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    request = _request()
    data = RequestData([RequestParameter.from_input("chat_id", 5), RequestParameter.from_input("text", "a&b=c ü")])
    assert await request.post(f"http://127.0.0.1:{port}/bot{TOKEN}/sendMessage", request_data=data) is True
    server.close()
    head, _, body = seen[0].partition(b"\r\n\r\n")
    assert b"content-type: application/x-www-form-urlencoded" in head.lower()
    assert body == b"chat_id=5&text=a%26b%3Dc+%C3%BC"


async def test_a_request_shut_down_still_sends_afterwards() -> None:
    """The channel's stop closes the pools; a bot started again opens new ones."""
    fake = FakeTelegram(bot_username="again_bot").start()
    try:
        bot = Bot(fake.token, base_url=f"{fake.url}/bot", request=_request())
        for _ in range(2):
            async with bot:
                assert (await bot.get_me()).username == "again_bot"
    finally:
        fake.stop()
