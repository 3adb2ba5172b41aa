"""What every model behind an HTTP completion API shares: the request, its retries, the stream, failures.

The requests go out on httpx, set up as the Bot API calls' are (bicameral.net); the vendor SDKs
would add their own HTTP stack and 14-40 MB of imports to say the same few JSON documents.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

import httpx

from bicameral.backoff import backoff_delay
from bicameral.models.base import Message, ModelError, ModelEvent, ToolSpec
from bicameral.models.sse import ServerEvent, server_events, text_lines
from bicameral.net import Proxies
from bicameral.net.client import ServiceTransport
from bicameral.redaction import Redactor

# The failures a second attempt may cure; the rest (auth, bad_request) will fail the same way again.
RETRYABLE_KINDS = frozenset({"rate_limit", "overloaded", "server", "connection", "timeout"})
# Statuses worth another try, as both vendors document them (409: a lock conflict on their side).
_RETRY_STATUSES = frozenset({408, 409, 429})
_RETRY_BASE_SECONDS = 0.5
_RETRY_CAP_SECONDS = 8.0
_RETRY_AFTER_CAP_SECONDS = 60.0  # a longer wait is better spent telling the user
# Connections kept for the next burst: a new TLS connection to a provider costs a handshake.
_CONNECTIONS = 256
# The connection died before any answer came: most likely a kept-alive one the server had just
# closed, so the request is sent again at once on a new one (later such failures wait their backoff).
_LOST_BEFORE_ANSWER = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
_FORBIDDEN_IN_HEADERS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters but tab
_TOOL_SETS_KEPT = 8  # the front's actions, the executor's tools, and a few sets as MCP servers come and go
_HEADLINES = {
    "rate_limit": "{} is rate-limiting requests",
    "overloaded": "{} is overloaded",
    "auth": "{} rejected the credentials",
    "bad_request": "{} rejected the request",
    "server": "{} had a server error",
    "timeout": "{} timed out",
}


class StreamReader(Protocol):
    """Turns one reply's server events into our events."""

    def feed(self, event: ServerEvent) -> list[ModelEvent]:
        """Events for one server event; raises ModelError for an error event."""

    def finish(self) -> list[ModelEvent]:
        """Events once the stream has ended; raises ModelError if the reply was incomplete."""


class RemoteModel(ABC):
    """A completion API reached over HTTP; subclasses speak its wire format."""

    provider: ClassVar[str]  # the `provider:` of a model reference
    default_base_url: ClassVar[str]
    path: ClassVar[str]  # the completion endpoint, under the base URL
    service: ClassVar[str]  # how error texts name the far end
    key_setting: ClassVar[str]  # the environment variable holding the API key
    missing_key: ClassVar[str]  # what to tell the owner when neither key nor base URL is set

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        max_retries: int,
        timeout: float,
        data_dir: Path,
        transport: ServiceTransport | None = None,
        proxies: Proxies | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = f"{self.provider}:{model}"
        self.model = model
        self.data_dir = Path(data_dir)
        self.base_url = base_url
        self.timeout = timeout
        self._api_key = api_key
        self._max_retries = max_retries
        self._shared_transport = transport
        self._own_transport: ServiceTransport | None = None
        self._checked_headers: dict[str, str] | None = None
        self._proxies = proxies
        self._sleep = sleep
        self._redact = Redactor([api_key] if api_key else [])
        # Tool schemas are most of a request and the same every call: each set is encoded once.
        self._encoded_tools: dict[tuple[int, ...], tuple[tuple[ToolSpec, ...], str]] = {}

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        """One completion as a stream of events; raises ModelError on failure."""
        if not self._api_key and not self.base_url:
            raise ModelError("auth", self.missing_key)
        headers = self._request_headers()
        body = self.encode_body(system, messages, tools, max_tokens)
        try:
            response = await self._open(headers, body)
            try:
                reader = self._reader()
                async for event in server_events(text_lines(response.aiter_raw())):
                    for out in self._read(reader, event):
                        yield out
            finally:
                await response.aclose()
            for out in reader.finish():
                yield out
        except httpx.TimeoutException:
            raise self.error("timeout", self.timeout_text()) from None
        except httpx.ConnectError:
            raise self.error("connection", f"could not connect to {self.service}") from None
        except httpx.ProxyError as err:
            raise self.error("connection", f"could not connect to {self.service} through the proxy: {err}") from None
        except httpx.TransportError as err:
            detail = str(err) or type(err).__name__
            raise self.error("connection", f"lost the connection to {self.service} mid-reply: {detail}") from None

    def encode_body(self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int) -> bytes:
        """The request body as sent: the call's own JSON with the tool set's, encoded once, spliced in."""
        text = json.dumps(self._body(system, messages, max_tokens), ensure_ascii=False)
        if tools:
            text = f'{text[:-1]}, "tools": {self._tools_json(tools)}}}'
        # "replace": a lone surrogate that slipped into a tool result must not sink the whole request.
        return text.encode("utf-8", "replace")

    async def aclose(self) -> None:
        """Close the kept-alive connections (a shared `transport` is left to its owner)."""
        if self._own_transport is not None:
            await self._own_transport.aclose()

    def error(self, kind: str, text: str) -> ModelError:
        """A ModelError whose text carries no configured secret."""
        return ModelError(kind, self._redact(text), retryable=kind in RETRYABLE_KINDS)

    def timeout_text(self) -> str:
        return f"{self.service} did not answer within {self.timeout:g}s"

    def status_error(self, status: int, detail: str, *, overloaded: bool = False, body_kind: str | None = None) -> ModelError:
        """An error answer with this HTTP status (200: an error event inside a stream), as a ModelError."""
        kind = _status_kind(status, overloaded, body_kind)
        where = f"HTTP {status}" if status != 200 else "mid-stream"
        text = f"{_HEADLINES[kind].format(self.service)} ({where})" + (f": {detail[:300]}" if detail else "")
        if kind == "auth":
            text += f"; check {self.key_setting}"
        return self.error(kind, text)

    # --- what each wire format supplies ---

    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """Authentication and versioning headers for every request."""

    @abstractmethod
    def _body(self, system: str, messages: list[Message], max_tokens: int) -> dict[str, Any]:
        """The JSON body of a streamed completion request, all but its `tools`."""

    @abstractmethod
    def _tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        """The request's `tools` field."""

    @abstractmethod
    def _reader(self) -> StreamReader:
        """A reader for one reply's events."""

    @abstractmethod
    def error_answer(self, status: int, body: Any) -> ModelError:
        """An error answer's `body` (parsed JSON, or its text when not JSON) as a ModelError; 200: an error event."""

    # --- private ---

    def _read(self, reader: StreamReader, event: ServerEvent) -> list[ModelEvent]:
        try:
            return reader.feed(event)
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            # Valid JSON of the wrong shape is as malformed as invalid JSON.
            raise self.error("server", f"{self.service} sent a malformed reply: {type(err).__name__}: {err}") from None

    def _tools_json(self, tools: list[ToolSpec]) -> str:
        # Keyed by identity, and the specs are held, so no id is reused while its entry lives.
        key = tuple(map(id, tools))
        found = self._encoded_tools.get(key)
        if found is None:
            if len(self._encoded_tools) >= _TOOL_SETS_KEPT:
                self._encoded_tools.pop(next(iter(self._encoded_tools)))
            found = self._encoded_tools[key] = (tuple(tools), json.dumps(self._tools(tools), ensure_ascii=False))
        return found[1]

    def _transport(self) -> ServiceTransport:
        if self._shared_transport is not None:
            return self._shared_transport
        if self._own_transport is None:
            self._own_transport = ServiceTransport(self._proxies or Proxies.none(), connections=_CONNECTIONS)
        return self._own_transport

    def _request_headers(self) -> dict[str, str]:
        """The request's headers, checked once: a value HTTP forbids (a key pasted with its line break) is refused
        unsent and unquoted."""
        if self._checked_headers is None:
            # The stream uncompressed, read as it comes (aiter_raw): no decoder layers between each chunk and us.
            headers = {"content-type": "application/json", "accept": "text/event-stream", "accept-encoding": "identity"}
            headers |= self._headers()
            for name, value in headers.items():
                if _FORBIDDEN_IN_HEADERS.search(value):
                    raise self.error("auth", f"the {name} header holds a character HTTP forbids (a line break?); "
                                     f"check {self.key_setting}")
            self._checked_headers = headers
        return self._checked_headers

    def _url(self) -> str:
        return (self.base_url or self.default_base_url).rstrip("/") + self.path

    async def _open(self, headers: dict[str, str], body: bytes) -> httpx.Response:
        """The streaming response to `body`, after the retries its failures allow; ModelError if none succeeds."""
        transport = self._transport()
        url = self._url()
        timeout = httpx.Timeout(self.timeout)
        tries = 0
        lost = False  # a connection already died before answering this call
        while True:
            tries += 1
            try:
                response = await transport.request("POST", url, timeout=timeout, headers=headers, content=body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError, *_LOST_BEFORE_ANSWER) as err:
                if isinstance(err, _LOST_BEFORE_ANSWER) and not lost:
                    lost, tries = True, tries - 1
                    continue
                if tries > self._max_retries:
                    raise
                await self._sleep(backoff_delay(_RETRY_BASE_SECONDS, _RETRY_CAP_SECONDS, tries))
                continue
            if response.status_code < 400 and _is_event_stream(response):
                return response
            try:
                await response.aread()
            finally:
                await response.aclose()
            if response.status_code < 400:
                # Success that is not a stream at all: a proxy's HTML page, a JSON body.
                shown = response.headers.get("content-type", "").split(";")[0] or "no content type"
                raise self.error("server", f"{self.service} answered with {shown} instead of an event stream")
            if tries > self._max_retries or not _worth_retrying(response):
                raise self.error_answer(response.status_code, _parsed(response))
            await self._sleep(_retry_delay(response.headers, tries))


def _is_event_stream(response: httpx.Response) -> bool:
    return str(response.headers.get("content-type", "")).startswith("text/event-stream")


def _worth_retrying(response: httpx.Response) -> bool:
    # Both vendors say explicitly when a retry would (not) help; otherwise the status decides.
    verdict: str | None = response.headers.get("x-should-retry")
    if verdict in ("true", "false"):
        return verdict == "true"
    return response.status_code in _RETRY_STATUSES or response.status_code >= 500


def _retry_delay(headers: Mapping[str, str], tries: int) -> float:
    """What the server asked for (`retry-after-ms`, `retry-after`), else the backoff for this try."""
    asked: float | None = None
    if (millis := headers.get("retry-after-ms")) is not None:
        asked = _number(millis)
        asked = asked / 1000 if asked is not None else None
    elif (after := headers.get("retry-after")) is not None:
        asked = _number(after)
        if asked is None:
            try:
                asked = parsedate_to_datetime(after).timestamp() - time.time()
            except (TypeError, ValueError):
                asked = None
    if asked is not None and 0 <= asked <= _RETRY_AFTER_CAP_SECONDS:
        return asked
    return backoff_delay(_RETRY_BASE_SECONDS, _RETRY_CAP_SECONDS, tries)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _parsed(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _status_kind(status: int, overloaded: bool, body_kind: str | None) -> str:
    if status == 529 or overloaded:
        return "overloaded"
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status >= 500:
        return "server"
    if 400 <= status < 500:
        return "bad_request"
    # A status-200 stream that carried an error event: its body type is then the only clue.
    return body_kind if body_kind in _HEADLINES else "server"
