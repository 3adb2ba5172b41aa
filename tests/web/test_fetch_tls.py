"""Over https the socket goes to the checked address while SNI and the certificate check use the name."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_network
from pathlib import Path

import pytest

from bicameral.tools.web import FetchArgs, WebFetch
from bicameral.web.address import AddressPolicy
from bicameral.web.fetch import WebFetcher
from tests.support.certificates import self_signed
from tests.web.conftest import Resolver


@dataclass
class TlsSite:
    port: int
    trust: ssl.SSLContext
    server_names: list[str | None] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)


@pytest.fixture
def tls_site(tmp_path: Path) -> Iterator[TlsSite]:
    cert, key = self_signed("secure.test", tmp_path)
    seen_names: list[str | None] = []
    seen_hosts: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = f"secure hello for {self.headers.get('Host', '')}".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            seen_hosts.append(self.headers.get("Host", ""))

    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    server_ctx.sni_callback = lambda sock, name, ctx: seen_names.append(name)  # type: ignore[assignment]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = server_ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    trust = ssl.create_default_context(cafile=str(cert))
    yield TlsSite(server.server_address[1], trust, seen_names, seen_hosts)
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _fetcher(site: TlsSite, name: str) -> WebFetcher:
    return WebFetcher(
        policy=AddressPolicy(allowed=(ip_network("127.0.0.1/32"),)),
        resolve=Resolver({name: [["127.0.0.1"], ["10.0.0.1"]]}),
        tls=site.trust,
    )


async def test_https_connects_to_the_checked_address_with_the_name_in_sni_and_host(tls_site, ctx):
    result = await WebFetch(_fetcher(tls_site, "secure.test")).run(
        FetchArgs(url=f"https://secure.test:{tls_site.port}/"), ctx
    )
    assert not result.is_error, result.content
    assert f"secure hello for secure.test:{tls_site.port}" in result.content
    assert tls_site.server_names == ["secure.test"]


async def test_a_certificate_for_another_name_is_refused(tls_site, ctx):
    result = await WebFetch(_fetcher(tls_site, "impostor.test")).run(
        FetchArgs(url=f"https://impostor.test:{tls_site.port}/"), ctx
    )
    assert result.is_error and "could not fetch https://impostor.test" in result.content
    assert tls_site.hosts == []
