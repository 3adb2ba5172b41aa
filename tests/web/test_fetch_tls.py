"""Over https the socket goes to the checked address while SNI and the certificate check use the name."""

from __future__ import annotations

import datetime
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_network
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bicameral.tools.web import FetchArgs, WebFetch
from bicameral.web.address import AddressPolicy
from bicameral.web.fetch import WebFetcher
from tests.web.conftest import Resolver


def _self_signed(name: str, directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@dataclass
class TlsSite:
    port: int
    trust: ssl.SSLContext
    server_names: list[str | None] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)


@pytest.fixture
def tls_site(tmp_path: Path) -> Iterator[TlsSite]:
    cert, key = _self_signed("secure.test", tmp_path)
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
