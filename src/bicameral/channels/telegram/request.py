"""PTB's HTTP layer on bicameral.transport: the same form and multipart requests as its httpx one, for less CPU."""

from __future__ import annotations

import ssl
from typing import IO

from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

from bicameral.transport import HttpClient, Proxies, Timeouts, TransportError, TransportTimeout, encode_multipart

_FORM = {"content-type": "application/x-www-form-urlencoded"}


class BotRequest(BaseRequest):
    """Sends the Bot API calls of one `telegram.Bot` over kept-alive connections."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        write_timeout: float,
        media_write_timeout: float,
        connections: int,
        proxies: Proxies | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._timeouts = Timeouts(connect=connect_timeout, read=read_timeout, write=write_timeout)
        self._media_write_timeout = media_write_timeout
        self._client = HttpClient(timeouts=self._timeouts, ssl_context=ssl_context, idle_per_origin=connections, proxies=proxies)

    @property
    def read_timeout(self) -> float | None:
        return self._timeouts.read

    async def initialize(self) -> None:
        """Nothing to open: connections are made on first use."""

    async def shutdown(self) -> None:
        await self._client.aclose()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: object = BaseRequest.DEFAULT_NONE,
        write_timeout: object = BaseRequest.DEFAULT_NONE,
        connect_timeout: object = BaseRequest.DEFAULT_NONE,
        pool_timeout: object = BaseRequest.DEFAULT_NONE,  # no pool to wait for: the actions cap calls in flight
    ) -> tuple[int, bytes]:
        """One call's status and body; a timeout raises TimedOut and any other transport failure NetworkError."""
        uploads = request_data is not None and request_data.contains_files
        default_write = self._media_write_timeout if uploads else self._timeouts.write
        timeouts = Timeouts(
            connect=_chosen(connect_timeout, self._timeouts.connect),
            read=_chosen(read_timeout, self._timeouts.read),
            write=_chosen(write_timeout, default_write),
        )
        headers, body = _encoded(request_data)
        try:
            response = await self._client.request(method, url, headers=headers, body=body, timeouts=timeouts)
        except TransportTimeout as err:
            raise TimedOut(str(err)) from err
        except TransportError as err:
            raise NetworkError(f"{type(err).__name__}: {err}") from err
        return response.status, await response.read()


def _encoded(request_data: RequestData | None) -> tuple[dict[str, str], bytes]:
    """Headers and body as PTB's own httpx layer sends them: a form, or multipart when files go along."""
    if request_data is None:
        return {"user-agent": BaseRequest.USER_AGENT}, b""
    if request_data.contains_files:
        files = {name: (filename, _content(data), mime) for name, (filename, data, mime) in request_data.multipart_data.items()}
        content_type, body = encode_multipart(request_data.json_parameters, files)
        return {"user-agent": BaseRequest.USER_AGENT, "content-type": content_type}, body
    return {"user-agent": BaseRequest.USER_AGENT, **_FORM}, request_data.url_encoded_parameters().encode("ascii")


def _content(data: bytes | IO[bytes]) -> bytes:
    return data if isinstance(data, bytes) else data.read()


def _chosen(given: object, default: float | None) -> float | None:
    """A timeout PTB passed on, or ours when it passed its DEFAULT_NONE marker."""
    if given is BaseRequest.DEFAULT_NONE or not (given is None or isinstance(given, int | float)):
        return default
    return given
