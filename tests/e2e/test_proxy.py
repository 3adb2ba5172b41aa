"""The proxy variables reach the Bot API and model API connections through Settings, HTTP and SOCKS5 proxies alike;
a proxy we cannot speak stops the start."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from bicameral.app import model_config, telegram_config
from bicameral.channels.telegram import TelegramChannel
from bicameral.errors import ConfigError
from bicameral.models import build_model
from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.support.socks import Socks5Proxy


@dataclass
class ForwardProxy:
    """An HTTP proxy for plain http: one request per connection, forwarded in origin form, recorded."""

    port: int = 0
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (request line, Proxy-Authorization)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def targets(self) -> list[str]:
        """The absolute URLs asked for, lower-cased (Bot API method names are case-insensitive)."""
        return [line.split(" ")[1].lower() for line, _ in self.requests]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Cancelled at teardown with a long poll under way: that is the end of it, not an error.
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            headers = dict(line.split(": ", 1) for line in header_lines if ": " in line)
            lowered = {name.lower(): value for name, value in headers.items()}
            self.requests.append((request_line, lowered.get("proxy-authorization")))
            body = await reader.readexactly(int(lowered.get("content-length", "0")))
            method, absolute, version = request_line.split(" ")
            authority, _, path = absolute.removeprefix("http://").partition("/")
            host, _, port = authority.partition(":")
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port or 80))
            forwarded = [f"{method} /{path} {version}"]
            forwarded += [f"{n}: {v}" for n, v in headers.items() if n.lower() not in ("proxy-authorization", "connection")]
            upstream_writer.write(("\r\n".join([*forwarded, "Connection: close"]) + "\r\n\r\n").encode("latin-1") + body)
            while chunk := await upstream_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
            upstream_writer.close()
        writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[ForwardProxy]:
    forward = ForwardProxy()
    server = await asyncio.start_server(forward.handle, "127.0.0.1", 0)
    forward.port = server.sockets[0].getsockname()[1]
    yield forward
    server.close()


async def test_the_bot_api_and_the_model_go_through_the_configured_proxy(telegram, models, start_bot, proxy):
    models.script(Reply(text="through the proxy"))
    await start_bot(http_proxy=f"http://user:p%40ss@127.0.0.1:{proxy.port}")
    telegram.user_sends(OWNER, "hello")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "through the proxy"
    targets = proxy.targets()
    assert any(t.startswith(telegram.url.lower()) and t.endswith("/getme") for t in targets), targets
    assert any(t.startswith(telegram.url.lower()) and t.endswith("/sendmessage") for t in targets), targets
    assert any(t.startswith(models.openai_url.lower()) for t in targets), targets
    # Credentials in the proxy URL become the proxy's Basic credentials: "user:p@ss".
    assert {auth for _, auth in proxy.requests} == {"Basic dXNlcjpwQHNz"}


@pytest.fixture
async def socks() -> AsyncIterator[Socks5Proxy]:
    proxy = await Socks5Proxy(names={"models.invalid": "127.0.0.1"}, credentials=("user", "p@ss")).start()
    yield proxy
    await proxy.stop()


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
async def test_the_bot_api_and_the_model_go_through_a_socks5_proxy(telegram, models, start_bot, socks, scheme):
    models.script(Reply(text="through the socks proxy"))
    # The model's host is a name only the proxy can resolve.
    model_url = models.openai_url.replace("127.0.0.1", "models.invalid")
    await start_bot(all_proxy=socks.url(scheme, userinfo="user:p%40ss"), openai_base_url=model_url)
    telegram.user_sends(OWNER, "hello")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "through the socks proxy"
    telegram_port = int(telegram.url.rsplit(":", 1)[1].split("/")[0])
    model_port = int(models.openai_url.rsplit(":", 1)[1].split("/")[0])
    assert ("ipv4", "127.0.0.1", telegram_port) in socks.targets
    assert ("name", "models.invalid", model_port) in socks.targets
    assert set(socks.offered) == {("user", "p@ss")}


async def test_no_proxy_sends_the_listed_hosts_direct(telegram, models, start_bot, proxy):
    models.script(Reply(text="direct"))
    await start_bot(http_proxy=proxy.url, no_proxy="127.0.0.1")
    telegram.user_sends(OWNER, "hello")
    assert (await telegram.await_sent(OWNER, 1))[0]["text"] == "direct"
    assert proxy.requests == []


@pytest.mark.parametrize("variable", ["https_proxy", "http_proxy", "all_proxy"])
def test_a_proxy_scheme_we_cannot_speak_is_a_config_error_at_construction(make_settings, variable):
    settings = make_settings(**{variable: "socks4://127.0.0.1:1080"})
    with pytest.raises(ConfigError, match=variable.upper()):
        TelegramChannel(telegram_config(settings))
    with pytest.raises(ConfigError, match=variable.upper()):
        build_model("openai:gpt-test", model_config(settings))


def test_bicameral_run_with_a_socks4_proxy_says_so_and_exits(tmp_path, telegram):
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "BICAMERAL_DATA_DIR": str(tmp_path / "data"),
        "BICAMERAL_TELEGRAM_TOKEN": telegram.token,
        "BICAMERAL_TELEGRAM_API_URL": telegram.url,
        "HTTPS_PROXY": "socks4://127.0.0.1:1080",
    }
    done = subprocess.run(
        [sys.executable, "-m", "bicameral", "run"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "HTTPS_PROXY" in done.stderr and "socks4" in done.stderr
    assert "Traceback" not in done.stderr
