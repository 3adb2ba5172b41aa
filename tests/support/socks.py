"""A small SOCKS5 proxy for tests (RFC 1928, CONNECT only, with RFC 1929's user name and password)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from dataclasses import dataclass, field


@dataclass
class Socks5Proxy:
    """Tunnels to the targets it is asked for, resolving names itself from `names` (others: "host unreachable").

    It logs the credentials offered and each target as (kind, address, port), kind being "name", "ipv4" or
    "ipv6"; with `credentials` set, it asks for them and ends the handshake on wrong ones.
    """

    names: dict[str, str] = field(default_factory=dict)
    credentials: tuple[str, str] | None = None
    offered: list[tuple[str, str]] = field(default_factory=list)
    targets: list[tuple[str, str, int]] = field(default_factory=list)
    accepted: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> Socks5Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def url(self, scheme: str = "socks5", userinfo: str = "") -> str:
        return f"{scheme}://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        # In a task of its own, so stop() can end a tunnel still open (a long poll) without asyncio complaining.
        task = asyncio.create_task(self._serve(reader, writer))
        self._tasks.add(task)
        try:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                await task
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        read = reader.readexactly
        _version, count = await read(2)
        methods = await read(count)
        wanted = 0x02 if self.credentials else 0x00
        if wanted not in methods:
            writer.write(b"\x05\xff")
            return
        writer.write(bytes([5, wanted]))
        if self.credentials:
            _version, size = await read(2)
            user = (await read(size)).decode()
            (size,) = await read(1)
            password = (await read(size)).decode()
            self.offered.append((user, password))
            if (user, password) != self.credentials:
                writer.write(b"\x01\x01")
                return
            writer.write(b"\x01\x00")
        _version, _command, _reserved, kind = await read(4)
        if kind == 1:
            target, shown = str(ipaddress.IPv4Address(await read(4))), "ipv4"
        elif kind == 3:
            (size,) = await read(1)
            target, shown = (await read(size)).decode(), "name"
        else:
            target, shown = str(ipaddress.IPv6Address(await read(16))), "ipv6"
        port = int.from_bytes(await read(2), "big")
        self.targets.append((shown, target, port))
        address = self.names.get(target) if shown == "name" else target
        if address is None:
            writer.write(b"\x05\x04\x00\x01" + bytes(6))  # host unreachable
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(address, port)
        writer.write(b"\x05\x00\x00\x01" + bytes(6))
        back = asyncio.create_task(_copy(upstream_reader, writer))
        try:
            await _copy(reader, upstream_writer)
        finally:
            upstream_writer.close()
            back.cancel()
            await asyncio.gather(back, return_exceptions=True)


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy bytes until the source ends or either side fails, then end the sink's side."""
    with contextlib.suppress(ConnectionError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    with contextlib.suppress(OSError, RuntimeError):
        sink.write_eof()
