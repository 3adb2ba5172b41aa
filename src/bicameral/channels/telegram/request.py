"""PTB's HTTP layer on the httpx transport every fixed service shares: the form and multipart requests of its own
HTTPXRequest, without httpx's client (redirects, cookies, hooks), which was a quarter of a call's CPU."""

from __future__ import annotations

import ssl

import httpx
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

from bicameral.net import Proxies
from bicameral.net.client import ServiceTransport


class BotRequest(BaseRequest):
    """Sends the Bot API calls of one `telegram.Bot` over kept-alive HTTP/1.1 connections."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        write_timeout: float,
        media_write_timeout: float,
        connections: int,
        proxies: Proxies | None = None,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._media_write_timeout = media_write_timeout
        # HTTP/1.1: a lone call over HTTP/2 cost 0.5 ms more CPU (measured over TLS), and the calls in flight are
        # capped at 16 anyway, each connection kept alive (the model APIs, with bursts of long streams, use HTTP/2).
        self._transport = ServiceTransport(proxies or Proxies.none(), connections=connections, http2=False, verify=verify)

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        """Nothing to open: connections are made on first use."""

    async def shutdown(self) -> None:
        await self._transport.aclose()

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
        """One call's status and body; a timeout raises TimedOut and any other failure NetworkError (never with the
        URL, which holds the token)."""
        uploads = request_data is not None and request_data.contains_files
        timeout = httpx.Timeout(
            connect=_chosen(connect_timeout, self._connect_timeout),
            read=_chosen(read_timeout, self._read_timeout),
            write=_chosen(write_timeout, self._media_write_timeout if uploads else self._write_timeout),
            pool=None,
        )
        try:
            response = await self._transport.request(
                method,
                url,
                timeout=timeout,
                headers={"user-agent": BaseRequest.USER_AGENT},
                data=request_data.json_parameters if request_data else None,
                files=request_data.multipart_data if uploads and request_data else None,
            )
            try:
                return response.status_code, await response.aread()
            finally:
                await response.aclose()
        except httpx.TimeoutException as err:
            raise TimedOut(_timed_out(err, timeout)) from err
        except httpx.HTTPError as err:
            raise NetworkError(f"httpx.{type(err).__name__}: {err}") from err


def _chosen(given: object, default: float | None) -> float | None:
    """A timeout PTB passed on, or ours when it passed its DEFAULT_NONE marker."""
    if given is BaseRequest.DEFAULT_NONE or not (given is None or isinstance(given, int | float)):
        return default
    return given


def _timed_out(err: httpx.TimeoutException, timeout: httpx.Timeout) -> str:
    """Which limit ran out, in a sentence."""
    if isinstance(err, httpx.ConnectTimeout):
        return f"could not connect to the Bot API within {timeout.connect:g}s"
    if isinstance(err, httpx.WriteTimeout):
        return f"the Bot API did not take the request within {timeout.write:g}s"
    return f"the Bot API did not answer within {timeout.read:g}s"
