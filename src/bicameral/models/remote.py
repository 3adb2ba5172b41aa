"""What every model behind a vendor SDK shares: the lazy client, aclose, secrets and failure mapping."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import httpx2

from bicameral.models.base import Message, ModelError, ModelEvent, ToolSpec
from bicameral.redaction import Redactor

# Gateways and local servers ignore the key, but both SDKs refuse to build a client without one.
PLACEHOLDER_KEY = "not-needed"
# The failures a second attempt may cure; the rest (auth, bad_request) will fail the same way again.
RETRYABLE_KINDS = frozenset({"rate_limit", "overloaded", "server", "connection", "timeout"})
_HEADLINES = {
    "rate_limit": "{} is rate-limiting requests",
    "overloaded": "{} is overloaded",
    "auth": "{} rejected the credentials",
    "bad_request": "{} rejected the request",
    "server": "{} had a server error",
    "timeout": "{} timed out",
}


class _Client(Protocol):
    """What the base needs of an SDK client beyond construction."""

    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Client)


class RemoteModel(ABC, Generic[ClientT]):
    """A completion API reached over HTTP through its vendor SDK; subclasses speak the wire format."""

    provider: ClassVar[str]  # the `provider:` of a model reference
    default_base_url: ClassVar[str]
    service: ClassVar[str]  # how error texts name the far end
    key_setting: ClassVar[str]  # the environment variable holding the API key
    missing_key: ClassVar[str]  # what to tell the owner when neither key nor base URL is set
    sdk_timeout: ClassVar[type[Exception]]  # the SDK's "no answer in time"
    sdk_unreachable: ClassVar[type[Exception]]  # the SDK's "could not connect" (after its retries)
    sdk_errors: ClassVar[type[Exception]]  # the SDK's other failures, mapped by `_sdk_error`

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        max_retries: int,
        timeout: float,
        data_dir: Path,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self.name = f"{self.provider}:{model}"
        self.model = model
        self.data_dir = Path(data_dir)
        self.base_url = base_url
        self.timeout = timeout
        self._api_key = api_key
        self._max_retries = max_retries
        self._http_client = http_client
        self._client: ClientT | None = None
        self._redact = Redactor([api_key] if api_key else [])

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        """One completion as a stream of events; raises ModelError on failure."""
        client = self._get_client()
        try:
            async for event in self._stream(client, system, messages, tools, max_tokens):
                yield event
        except (httpx2.TimeoutException, self.sdk_timeout):
            raise self.error("timeout", self.timeout_text()) from None
        except self.sdk_unreachable:
            raise self.error("connection", f"could not connect to {self.service}") from None
        except self.sdk_errors as err:
            raise self._sdk_error(err) from None
        except httpx2.TransportError as err:
            # The SDKs wrap connect failures, but a connection dropped mid-stream surfaces raw.
            raise self.error("connection", f"lost the connection to {self.service} mid-reply: {err}") from None
        except ValueError as err:
            # A status-200 body that is not the JSON it claims to be (a proxy's page, a cut-off event).
            raise self.error("server", f"{self.service} sent a malformed reply: {err}") from None

    async def aclose(self) -> None:
        """Release the HTTP connection pool (a shared `http_client` is left to its owner)."""
        if self._client is not None and self._http_client is None:
            await self._client.close()
        self._client = None

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

    def expect_event_stream(self, response: httpx2.Response) -> None:
        """Refuse a status-200 answer that is not a stream at all (an HTML error page, a JSON body)."""
        content_type = response.headers.get("content-type", "")
        if not content_type.startswith("text/event-stream"):
            shown = content_type.split(";")[0] or "no content type"
            raise self.error("server", f"{self.service} answered with {shown} instead of an event stream")

    # --- what each wire format supplies ---

    @abstractmethod
    def _new_client(self, **options: Any) -> ClientT:
        """The SDK client built from exactly these options."""

    @abstractmethod
    def _stream(
        self, client: ClientT, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        """The request and its events in this API's wire format; SDK and transport errors propagate."""

    @abstractmethod
    def _sdk_error(self, err: Exception) -> ModelError:
        """One of `sdk_errors` as a ModelError."""

    # --- private ---

    def _get_client(self) -> ClientT:
        if self._client is None:
            if not self._api_key and not self.base_url:
                raise ModelError("auth", self.missing_key)
            # Everything is passed explicitly so the SDK never falls back to env vars or profiles.
            self._client = self._new_client(
                api_key=self._api_key or PLACEHOLDER_KEY,
                base_url=self.base_url or self.default_base_url,
                max_retries=self._max_retries,
                timeout=self.timeout,
                http_client=self._http_client,
            )
        return self._client


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
