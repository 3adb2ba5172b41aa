"""Scripted fake model server speaking the Anthropic Messages and OpenAI Chat Completions wire formats.

The server runs aiohttp in its own thread with its own event loop, so sync tests, async tests (on any
loop) and subprocesses can all talk to it over real HTTP. Point clients at it with::

    anthropic.AsyncAnthropic(base_url=server.url, api_key="x")
    openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="x")

Reply resolution for a request whose model is ``m``:

1. the route key is ``m`` if a queue/responder was registered for exactly ``m``, else the longest
   registered ``prefix*`` key that ``m`` starts with, else ``None`` (the default route);
2. the next queued reply of that route, else that route's responder, else the default responder,
   else ``Reply("ok")``. A model with a route of its own never consumes the default queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import re
import secrets
import string
import threading
import time
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from aiohttp import web

__all__ = [
    "DEFAULT_RETRY_AFTER",
    "ModelServer",
    "Reply",
    "Request",
    "ToolCall",
    "echo_responder",
]

# Sent as `retry-after` on a 429 that did not script one: both SDKs honour any positive value, so a
# tiny one keeps retry tests fast (with 0 they would fall back to ~0.5 s exponential backoff).
DEFAULT_RETRY_AFTER = 0.01

# What a reverse proxy in front of a model server sends when its upstream is down.
_HTML_PAGE = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"

_DONE = b"data: [DONE]\n\n"  # the OpenAI stream's last line

# Characters of serialised JSON per streamed `input_json_delta` / tool-call `arguments` chunk; small
# enough that clients must really reassemble partial JSON.
_JSON_CHUNK = 12


# --------------------------------------------------------------------------------------------------
# Scripting types
# --------------------------------------------------------------------------------------------------


@dataclass
class ToolCall:
    """A tool call the fake model makes; `id` is generated (toolu_... / call_...) when None."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass
class Reply:
    """One scripted model turn (or an error in its place)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    latency: float = 0.0  # seconds before the first byte; async, so other requests are unaffected
    chunk_delay: float = 0.0  # seconds before each streamed content delta
    error_status: int | None = None  # 429 / 500 / 529 ... respond with an error instead
    error_message: str = "scripted error"
    retry_after: float | None = None  # `retry-after` header; 429 defaults to DEFAULT_RETRY_AFTER
    stop_reason: str | None = None  # either API's vocabulary; default end_turn/stop or tool_use/tool_calls
    usage: tuple[int, int] | None = None  # (input_tokens, output_tokens); default estimated from lengths
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0  # OpenAI: reported as prompt_tokens_details.cached_tokens
    chunks: list[str] | None = None  # explicit text deltas for streaming; overrides `text` when set
    error_type: str | None = None  # override the error `type` derived from error_status
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers
    abort_after_events: int | None = None  # streaming: drop the connection after this many SSE events
    # Streaming: after this many SSE events send an error event (error_type/error_message), then end.
    error_after_events: int | None = None
    # Streaming: before content delta number n (from 0) is sent, wait until the event is set (at most 30 s), so a test
    # sees what the client made of the deltas before it, with the rest of the reply still to come.
    hold: tuple[int, threading.Event] | None = None
    # A status-200 answer that is garbage: "html" (a proxy's error page), "truncated_json" (a body or
    # SSE event cut mid-JSON), "early_end" (a stream closed cleanly before its final event) or
    # "empty_choices" (OpenAI chunks / completion without any choice; Anthropic: no content at all).
    malformed: Literal["html", "truncated_json", "early_end", "empty_choices"] | None = None

    @property
    def full_text(self) -> str:
        """The complete reply text (joined `chunks` when given)."""
        return "".join(self.chunks) if self.chunks is not None else self.text


@dataclass
class Request:
    """One model request as the server received it (plus what it answered)."""

    api: str  # "anthropic" | "openai"
    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    stream: bool
    received_at: float
    raw: dict[str, Any]
    path: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    reply: Reply | None = None  # the Reply that was served
    status: int | None = None  # HTTP status sent
    response: dict[str, Any] | None = None  # JSON body, or for streams the equivalent complete object
    events: list[dict[str, Any]] = field(default_factory=list)  # streamed SSE payloads, in order
    completed_at: float | None = None
    client_disconnected: bool = False

    def last_user_text(self) -> str:
        """Text of the last user turn (text parts, tool_result / tool message contents), newline-joined."""
        if self.api == "anthropic":
            msg = _last_anthropic_user(self.messages)
            return _content_text(msg.get("content")) if msg else ""
        return "\n".join(_content_text(m.get("content")) for m in _last_openai_user_turn(self.messages))

    def tool_results(self) -> list[dict[str, Any]]:
        """Tool results of the last user turn: [{tool_use_id|tool_call_id, id, content, is_error}]."""
        if self.api == "anthropic":
            msg = _last_anthropic_user(self.messages)
            blocks = msg.get("content") if msg else None
            if not isinstance(blocks, list):
                return []
            return [
                {
                    "tool_use_id": b.get("tool_use_id"),
                    "id": b.get("tool_use_id"),
                    "content": _content_text(b.get("content")),
                    "is_error": bool(b.get("is_error", False)),
                }
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
        return [
            {
                "tool_call_id": m.get("tool_call_id"),
                "id": m.get("tool_call_id"),
                "content": _content_text(m.get("content")),
                "is_error": False,  # OpenAI has no error flag on tool messages
            }
            for m in _last_openai_user_turn(self.messages)
            if m.get("role") == "tool"
        ]

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered in this request."""
        names = []
        for t in self.tools:
            fn = t.get("function") if isinstance(t.get("function"), dict) else None
            names.append(str((fn or t).get("name", "")))
        return names

    @property
    def latency(self) -> float:
        """Seconds from arrival to completion; 0.0 while still in flight."""
        return (self.completed_at - self.received_at) if self.completed_at is not None else 0.0


ReplySource: TypeAlias = "Reply | str | Callable[[Request], Reply | str | Awaitable[Reply | str]]"
Responder: TypeAlias = "Callable[[Request], Reply | str | Awaitable[Reply | str]]"


def echo_responder(req: Request) -> Reply:
    """Reply with "echo: " + the last user text."""
    return Reply(text="echo: " + req.last_user_text())


# --------------------------------------------------------------------------------------------------
# Message helpers
# --------------------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    """Flatten a str / content-part list (text, tool_result) into newline-joined text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            if part.get("type") in ("text", "input_text") and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif part.get("type") == "tool_result":
                parts.append(_content_text(part.get("content")))
    return "\n".join(parts)


def _last_anthropic_user(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last role=user message."""
    return next((m for m in reversed(messages) if m.get("role") == "user"), None)


def _last_openai_user_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trailing user/tool messages after the last assistant one (mirrors Anthropic's user turn)."""
    turn: list[dict[str, Any]] = []
    for m in reversed(messages):
        if m.get("role") not in ("user", "tool"):
            break
        turn.append(m)
    if turn:
        return turn[::-1]
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return [last] if last else []


def _openai_system(messages: list[dict[str, Any]]) -> str:
    """Newline-joined text of all system/developer messages."""
    return "\n".join(
        _content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    )


def _rand_id(prefix: str, n: int) -> str:
    """A random base62 id like the real APIs hand out."""
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(n))


def _estimate_tokens(*objs: Any) -> int:
    """Rough token count: ~4 characters per token, at least 1."""
    chars = sum(len(o if isinstance(o, str) else json.dumps(o, ensure_ascii=False)) for o in objs if o)
    return max(1, chars // 4)


def _split_text(text: str) -> list[str]:
    """Word-sized stream pieces that concatenate back to exactly `text`."""
    return re.findall(r"\S+\s*|\s+", text)


def _split_json(s: str) -> list[str]:
    """Fixed-size slices of serialised JSON."""
    return [s[i : i + _JSON_CHUNK] for i in range(0, len(s), _JSON_CHUNK)] or [""]


def _route_matches(key: str, model: str) -> bool:
    """Exact match, or prefix match when the key ends with '*'."""
    return model.startswith(key[:-1]) if key.endswith("*") else model == key


def _fmt_seconds(s: float) -> str:
    """Header-friendly seconds: "2" rather than "2.0"."""
    return str(int(s)) if float(s).is_integer() else repr(float(s))


_ANTHROPIC_TO_OPENAI_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_OPENAI_TO_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "overloaded"),
    529: ("server_error", "overloaded"),
}


@dataclass
class _Turn:
    """A resolved Reply with ids and token counts fixed, rendered identically for stream and non-stream."""

    chunks: list[str]
    tools: list[tuple[str, str, dict[str, Any]]]  # (id, name, input)
    stop_reason: str  # Anthropic vocabulary
    input_tokens: int
    output_tokens: int
    cache_creation: int
    cache_read: int

    @property
    def text(self) -> str:
        """The whole text."""
        return "".join(self.chunks)


def _make_turn(reply: Reply, req: Request, tool_prefix: str, tool_id_len: int) -> _Turn:
    """Resolve ids, stop reason and usage for one reply."""
    text = reply.full_text
    tools = [(tc.id or _rand_id(tool_prefix, tool_id_len), tc.name, tc.input) for tc in reply.tool_calls]
    stop = reply.stop_reason or ("tool_use" if tools else "end_turn")
    stop = _OPENAI_TO_ANTHROPIC_STOP.get(stop, stop) if stop not in _ANTHROPIC_TO_OPENAI_STOP else stop
    if reply.usage is not None:
        in_tok, out_tok = reply.usage
    else:
        in_tok = _estimate_tokens(req.system, req.messages, req.tools)
        out_tok = _estimate_tokens(text, *[[name, args] for _, name, args in tools])
    return _Turn(
        chunks=list(reply.chunks) if reply.chunks is not None else _split_text(text),
        tools=tools,
        stop_reason=stop,
        input_tokens=in_tok,
        output_tokens=out_tok,
        cache_creation=reply.cache_creation_input_tokens,
        cache_read=reply.cache_read_input_tokens,
    )


# --------------------------------------------------------------------------------------------------
# Wire renderers
# --------------------------------------------------------------------------------------------------


def _anthropic_usage(turn: _Turn) -> dict[str, Any]:
    """Anthropic `usage` object."""
    return {
        "input_tokens": turn.input_tokens,
        "cache_creation_input_tokens": turn.cache_creation,
        "cache_read_input_tokens": turn.cache_read,
        "output_tokens": turn.output_tokens,
        "service_tier": "standard",
    }


def _anthropic_message(turn: _Turn, model: str, msg_id: str) -> dict[str, Any]:
    """Non-streaming Anthropic Message."""
    content: list[dict[str, Any]] = []
    # Real responses may carry only tool_use blocks; keep an (empty) text block otherwise so
    # `content[0].text` works for plain replies.
    if turn.text or not turn.tools:
        content.append({"type": "text", "text": turn.text})
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in turn.tools]
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": _anthropic_usage(turn),
    }


def _anthropic_events(turn: _Turn, model: str, msg_id: str) -> list[tuple[dict[str, Any], bool]]:
    """Anthropic SSE payloads, each flagged True when it is a content delta (subject to chunk_delay)."""
    start_usage = _anthropic_usage(turn) | {"output_tokens": 1}  # the real API reports 1 at start
    message = _anthropic_message(turn, model, msg_id) | {
        "content": [],
        "stop_reason": None,
        "usage": start_usage,
    }
    events: list[tuple[dict[str, Any], bool]] = [
        ({"type": "message_start", "message": message}, False),
        ({"type": "ping"}, False),
    ]
    index = 0
    if turn.text or not turn.tools:
        events.append(
            ({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}, False)
        )
        for piece in turn.chunks:
            delta = {"type": "text_delta", "text": piece}
            events.append(({"type": "content_block_delta", "index": index, "delta": delta}, True))
        events.append(({"type": "content_block_stop", "index": index}, False))
        index += 1
    for tool_id, name, args in turn.tools:
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
        events.append(({"type": "content_block_start", "index": index, "content_block": block}, False))
        for piece in _split_json(json.dumps(args)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(({"type": "content_block_delta", "index": index, "delta": delta}, True))
        events.append(({"type": "content_block_stop", "index": index}, False))
        index += 1
    delta_usage = {k: v for k, v in _anthropic_usage(turn).items() if k != "service_tier"}
    events.append(
        (
            {
                "type": "message_delta",
                "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                "usage": delta_usage,
            },
            False,
        )
    )
    events.append(({"type": "message_stop"}, False))
    return events


def _emptied(payload: dict[str, Any]) -> dict[str, Any]:
    """A message, completion or chunk with no content or choices left."""
    if "choices" in payload:
        return payload | {"choices": []}
    if payload.get("type") == "message":
        return payload | {"content": []}
    if payload.get("type") == "message_start":
        return payload | {"message": _emptied(payload["message"])}
    return payload


def _openai_usage(turn: _Turn) -> dict[str, Any]:
    """OpenAI `usage`; prompt_tokens includes cached tokens, as OpenAI counts them."""
    prompt = turn.input_tokens + turn.cache_read + turn.cache_creation
    return {
        "prompt_tokens": prompt,
        "completion_tokens": turn.output_tokens,
        "total_tokens": prompt + turn.output_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _openai_finish(turn: _Turn) -> str:
    """Map the Anthropic-vocabulary stop reason to an OpenAI finish_reason."""
    return _ANTHROPIC_TO_OPENAI_STOP.get(turn.stop_reason, turn.stop_reason)


def _openai_completion(turn: _Turn, model: str, cid: str, created: int) -> dict[str, Any]:
    """Non-streaming ChatCompletion."""
    message: dict[str, Any] = {
        "role": "assistant",
        # The real API sends null content alongside tool calls.
        "content": turn.text if (turn.text or not turn.tools) else None,
        "refusal": None,
        "annotations": [],
    }
    if turn.tools:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in turn.tools
        ]
    return {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _openai_finish(turn)}],
        "usage": _openai_usage(turn),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _openai_chunks(
    turn: _Turn, model: str, cid: str, created: int, include_usage: bool
) -> list[tuple[dict[str, Any], bool]]:
    """ChatCompletionChunk payloads (without the final [DONE]), flagged True for content deltas."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        """One single-choice chunk."""
        c: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            c["usage"] = None  # the real API sends null usage on every chunk but the last
        return c

    out: list[tuple[dict[str, Any], bool]] = [(chunk({"role": "assistant", "content": "", "refusal": None}), False)]
    out += [(chunk({"content": piece}), True) for piece in turn.chunks]
    for index, (tool_id, name, args) in enumerate(turn.tools):
        head = {"index": index, "id": tool_id, "type": "function", "function": {"name": name, "arguments": ""}}
        out.append((chunk({"tool_calls": [head]}), True))
        for piece in _split_json(json.dumps(args)):
            out.append((chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), True))
    out.append((chunk({}, _openai_finish(turn)), False))
    if include_usage:
        last = chunk({}) | {"choices": [], "usage": _openai_usage(turn)}
        out.append((last, False))
    return out


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------


class _BadRequest(Exception):
    """Request body the real API would reject with 400."""


class ModelServer:
    """Scripted HTTP model server on 127.0.0.1, running in a background thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._queues: dict[str | None, deque[ReplySource]] = {None: deque()}
        self._responders: dict[str | None, Responder] = {}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._url: str | None = None
        self._startup_error: BaseException | None = None
        self.requests: list[Request] = []
        self.errors: list[BaseException] = []  # exceptions raised by scripted callables / the server
        self.rejected: list[dict[str, Any]] = []  # malformed requests answered with 400 (not in `requests`)
        self.count_tokens_requests: list[dict[str, Any]] = []

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL without /v1, e.g. http://127.0.0.1:PORT."""
        if self._url is None:
            raise RuntimeError("ModelServer is not started")
        return self._url

    @property
    def openai_url(self) -> str:
        """Base URL for the OpenAI SDK (with /v1)."""
        return self.url + "/v1"

    def env(self, api_key: str = "fake-key") -> dict[str, str]:
        """Environment variables pointing Anthropic/OpenAI clients (and subprocesses) at this server."""
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": api_key,
            "OPENAI_BASE_URL": self.openai_url,
            "OPENAI_API_KEY": api_key,
        }

    def start(self) -> ModelServer:
        """Start serving (idempotent); returns self."""
        if self._thread is not None:
            return self
        self._startup_error = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="fake-model-server", daemon=True)
        self._thread.start()
        if not ready.wait(15):
            raise RuntimeError("fake model server did not start within 15s")
        if self._startup_error is not None:
            self._thread = None
            raise RuntimeError("fake model server failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=15)
        self._thread = None
        self._url = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event) -> None:
        """Thread body: own loop, serve until stop(), then clean up on the same loop."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._startup_error = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._loop = None

    async def _serve(self) -> None:
        """Bind the app to a (random) port."""
        app = web.Application(client_max_size=64 * 1024 * 1024)  # big prompts with images are fine
        app.router.add_post("/v1/messages", self._handle_anthropic)
        app.router.add_post("/v1/messages/count_tokens", self._handle_count_tokens)
        app.router.add_post("/v1/chat/completions", self._handle_openai)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_get("/v1/models/{model_id}", self._handle_model)
        app.router.add_get("/", self._handle_root)  # also answers HEAD
        app.router.add_route("*", "/v1/{tail:.*}", self._handle_not_found)
        # Short shutdown timeout: in-flight scripted latencies must not stall stop().
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._url = f"http://{host}:{port}"

    # ---- scripting -------------------------------------------------------------------------------

    def script(self, *replies: ReplySource, model: str | None = None) -> None:
        """Queue replies (Reply, str, or callable(Request) -> Reply) for `model` (None = default queue)."""
        with self._lock:
            self._queues.setdefault(model, deque()).extend(replies)

    def responder(self, fn: Responder | None, model: str | None = None) -> None:
        """Set (or with None, clear) the fallback used when `model`'s queue is empty."""
        with self._lock:
            if fn is None:
                self._responders.pop(model, None)
            else:
                self._responders[model] = fn

    def pending(self, model: str | None = None) -> int:
        """Number of queued, not yet served replies for a route key."""
        with self._lock:
            return len(self._queues.get(model, ()))

    def reset(self) -> None:
        """Forget scripts, responders and logged requests."""
        with self._lock:
            self._queues = {None: deque()}
            self._responders.clear()
            self.requests.clear()
            self.errors.clear()
            self.rejected.clear()
            self.count_tokens_requests.clear()

    def requests_for(self, model: str | None = None) -> list[Request]:
        """Logged requests whose model matches (exact, or prefix when ending in '*'); None = all."""
        with self._lock:
            return [r for r in self.requests if model is None or _route_matches(model, r.model)]

    def wait_for_requests(self, count: int, timeout: float = 10.0, model: str | None = None) -> list[Request]:
        """Block until at least `count` matching requests arrived; returns all matching so far."""
        with self._cond:
            ok = self._cond.wait_for(lambda: len(self.requests_for(model)) >= count, timeout)
            if not ok:
                raise TimeoutError(self._timeout_message(count, model, timeout))
            return self.requests_for(model)

    async def await_requests(self, count: int, timeout: float = 10.0, model: str | None = None) -> list[Request]:
        """Async wait_for_requests usable from any event loop (the server lives on another loop)."""
        return await asyncio.to_thread(self.wait_for_requests, count, timeout, model)

    def wait_completed(self, count: int, timeout: float = 10.0) -> list[Request]:
        """Block until at least `count` requests were fully answered (a stream's last byte written)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._completed()) >= count, timeout):
                raise TimeoutError(f"expected {count} completed request(s) within {timeout}s; got {len(self._completed())}")
            return list(self.requests)

    async def await_completed(self, count: int, timeout: float = 10.0) -> list[Request]:
        """Async wait_completed: a client may return before the server recorded what it sent."""
        return await asyncio.to_thread(self.wait_completed, count, timeout)

    def _completed(self) -> list[Request]:
        return [r for r in self.requests if r.completed_at is not None]

    def _timeout_message(self, count: int, model: str | None, timeout: float) -> str:
        """Explain a wait timeout with what did arrive."""
        seen = [r.model for r in self.requests]
        return f"expected {count} request(s) for model={model!r} within {timeout}s; got models {seen}"

    def _route_key(self, model: str) -> str | None:
        """Which queue/responder key serves `model` (see module docstring)."""
        keys = [k for k in (*self._queues, *self._responders) if k is not None]
        if model in keys:
            return model
        wild = [k for k in keys if k.endswith("*") and model.startswith(k[:-1])]
        return max(wild, key=len) if wild else None

    async def _resolve(self, req: Request) -> Reply:
        """Pick and evaluate the reply for a request."""
        with self._lock:
            key = self._route_key(req.model)
            queue = self._queues.get(key)
            source: ReplySource
            if queue:
                source = queue.popleft()
            elif key in self._responders:
                source = self._responders[key]
            elif None in self._responders:
                source = self._responders[None]
            else:
                source = Reply(text="ok")
        result: Any = source(req) if callable(source) else source
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            return Reply(text=result)
        if not isinstance(result, Reply):
            raise TypeError(f"scripted reply must be Reply or str, got {type(result).__name__}")
        return result

    # ---- request plumbing ------------------------------------------------------------------------

    async def _read_json(self, request: web.Request) -> dict[str, Any]:
        """Parse the JSON body or raise _BadRequest."""
        text = await request.text()
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise _BadRequest(f"invalid JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise _BadRequest("request body must be a JSON object")
        return body

    def _log(self, req: Request) -> None:
        """Append to the request log and wake waiters."""
        with self._cond:
            self.requests.append(req)
            self._cond.notify_all()

    @contextlib.contextmanager
    def _recording(self, req: Request) -> Iterator[None]:
        """Record a request as completed however its handler ends (a client that hung up included)."""
        try:
            yield
        except (ConnectionError, asyncio.CancelledError):
            req.client_disconnected = True
            raise
        finally:
            if req.completed_at is None:
                self._finish(req, req.reply, req.status or 499, req.response)

    def _reject(self, request: web.Request, reason: str) -> None:
        """Remember a malformed request."""
        with self._lock:
            self.rejected.append({"path": request.path, "reason": reason})

    async def _reply_for(self, req: Request) -> tuple[Reply | None, str | None]:
        """Resolve the reply, turning scripting bugs into an error message instead of a crash."""
        try:
            return await self._resolve(req), None
        except Exception as exc:
            with self._lock:
                self.errors.append(exc)
            return None, "fake model server: scripted reply raised " + "".join(
                traceback.format_exception_only(type(exc), exc)
            ).strip()

    async def _scripted(
        self, req: Request, error_response: Callable[..., tuple[web.Response, dict[str, Any]]]
    ) -> Reply | web.Response:
        """The reply scripted for a logged request, after its latency; or the error response it scripted."""
        reply, failure = await self._reply_for(req)
        if reply is not None and reply.latency > 0:
            await asyncio.sleep(reply.latency)
        if reply is None or reply.error_status is not None:
            status = reply.error_status if reply else 500
            message = failure or (reply.error_message if reply else "")
            resp, err = error_response(status, message, reply.error_type if reply else None, self._error_headers(reply, status))
            self._finish(req, reply, status, err)
            return resp
        return reply

    def _finish(self, req: Request, reply: Reply | None, status: int, body: dict[str, Any] | None) -> None:
        """Record the outcome on the logged request."""
        with self._cond:
            req.reply, req.status, req.response, req.completed_at = reply, status, body, time.monotonic()
            self._cond.notify_all()

    @staticmethod
    def _error_headers(reply: Reply | None, status: int) -> dict[str, str]:
        """retry-after plus scripted headers for an error response."""
        headers: dict[str, str] = {}
        retry_after = reply.retry_after if reply else None
        if retry_after is None and status == 429:
            retry_after = DEFAULT_RETRY_AFTER
        if retry_after is not None:
            headers["retry-after"] = _fmt_seconds(retry_after)
        if reply is None:
            headers["x-should-retry"] = "false"  # a broken script won't get better by retrying
        else:
            headers.update(reply.headers)
        return headers

    async def _stream(
        self,
        request: web.Request,
        req: Request,
        reply: Reply,
        payloads: list[tuple[dict[str, Any], bool]],
        fmt: Callable[[dict[str, Any]], bytes],
        trailer: bytes = b"",
        headers: dict[str, str] | None = None,
        error_event: dict[str, Any] | None = None,
    ) -> web.StreamResponse:
        """Write SSE payloads with chunk_delay, honouring abort/error_after_events and client disconnects."""
        resp = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                **(headers or {}),
                **reply.headers,
            },
        )
        await resp.prepare(request)
        with self._lock:
            req.status = 200  # the status line is out: a client may have it before the stream ends
        sent = deltas = 0
        try:
            for payload, is_delta in payloads:
                if is_delta and reply.hold is not None and deltas == reply.hold[0]:
                    await asyncio.to_thread(reply.hold[1].wait, 30)
                if reply.abort_after_events is not None and sent >= reply.abort_after_events:
                    # Simulate a dropped connection: the client sees a truncated chunked body.
                    if request.transport is not None:
                        request.transport.abort()
                    return resp
                if reply.error_after_events is not None and sent >= reply.error_after_events and error_event:
                    req.events.append(error_event)
                    await resp.write(fmt(error_event))
                    break
                deltas += is_delta
                if is_delta and reply.chunk_delay > 0:
                    await asyncio.sleep(reply.chunk_delay)
                # Logged before it is written, so a client holding the bytes finds it in the log.
                req.events.append(payload)
                await resp.write(fmt(payload))
                sent += 1
            if trailer and not (reply.error_after_events is not None and sent >= reply.error_after_events):
                await resp.write(trailer)
            await resp.write_eof()
        except ConnectionError:
            req.client_disconnected = True
        return resp

    async def _garbage(
        self,
        request: web.Request,
        req: Request,
        reply: Reply,
        body: dict[str, Any],
        payloads: list[tuple[dict[str, Any], bool]],
        fmt: Callable[[dict[str, Any]], bytes],
        trailer: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        """Answer status 200 with the scripted kind of garbage (`Reply.malformed`)."""
        kind = reply.malformed
        headers = {**(headers or {}), **reply.headers}
        if kind == "html":
            self._finish(req, reply, 200, None)
            return web.Response(status=200, text=_HTML_PAGE, content_type="text/html", headers=headers)
        if kind == "empty_choices":
            body = _emptied(body)
            payloads = [(_emptied(p), d) for p, d in payloads if not str(p.get("type", "")).startswith("content_block")]
        if not req.stream:
            text = json.dumps(body)
            if kind in ("truncated_json", "early_end"):
                text = text[: len(text) // 2]
            self._finish(req, reply, 200, None)
            return web.Response(status=200, text=text, content_type="application/json", headers=headers)
        if kind == "empty_choices":
            return await self._stream(request, req, reply, payloads, fmt, trailer=trailer, headers=headers)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8", **headers})
        await resp.prepare(request)
        kept = payloads[: max(1, len(payloads) // 2)]
        try:
            for payload, _ in kept:
                req.events.append(payload)
                await resp.write(fmt(payload))
            if kind == "truncated_json":
                framed = fmt(payloads[len(kept)][0]).decode().rstrip("\n")
                head, _, data = framed.rpartition("data: ")
                await resp.write(f"{head}data: {data[: len(data) // 2]}\n\n".encode())
            await resp.write_eof()
        except ConnectionError:
            req.client_disconnected = True
        self._finish(req, reply, 200, None)
        return resp

    # ---- Anthropic -------------------------------------------------------------------------------

    @staticmethod
    def _anthropic_error(
        status: int, message: str, etype: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[web.Response, dict[str, Any]]:
        """JSON error in Anthropic's shape."""
        etype = etype or _ANTHROPIC_ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
        req_id = _rand_id("req_01", 22)
        body = {"type": "error", "error": {"type": etype, "message": message}, "request_id": req_id}
        return web.json_response(body, status=status, headers={"request-id": req_id, **(headers or {})}), body

    @staticmethod
    def _validate_anthropic(body: dict[str, Any]) -> None:
        """Reject what the real Messages API rejects most often."""
        if not isinstance(body.get("model"), str):
            raise _BadRequest("model: Field required")
        if not isinstance(body.get("messages"), list):
            raise _BadRequest("messages: Field required")
        if not isinstance(body.get("max_tokens"), int):
            raise _BadRequest("max_tokens: Field required")

    async def _handle_anthropic(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/messages."""
        try:
            body = await self._read_json(request)
            self._validate_anthropic(body)
        except _BadRequest as exc:
            self._reject(request, str(exc))
            return self._anthropic_error(400, str(exc))[0]
        system = body.get("system")
        req = Request(
            api="anthropic",
            model=body["model"],
            system=_content_text(system),
            messages=body["messages"],
            tools=list(body.get("tools") or []),
            stream=bool(body.get("stream")),
            received_at=time.monotonic(),
            raw=body,
            path=request.path_qs,
            headers=dict(request.headers),
        )
        self._log(req)
        with self._recording(req):
            reply = await self._scripted(req, self._anthropic_error)
            if not isinstance(reply, Reply):
                return reply  # the scripted error
            turn = _make_turn(reply, req, "toolu_01", 22)
            msg_id = _rand_id("msg_01", 22)
            message = _anthropic_message(turn, req.model, msg_id)
            req_id = _rand_id("req_01", 22)
            if not req.stream and not reply.malformed:
                self._finish(req, reply, 200, message)
                return web.json_response(message, headers={"request-id": req_id, **reply.headers})

            def fmt(payload: dict[str, Any]) -> bytes:
                """Anthropic SSE framing: named event + data."""
                return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()

            events = _anthropic_events(turn, req.model, msg_id)
            if reply.malformed:
                return await self._garbage(request, req, reply, message, events, fmt, headers={"request-id": req_id})
            etype = reply.error_type or _ANTHROPIC_ERROR_TYPES.get(reply.error_status or 500, "api_error")
            error_event = {"type": "error", "error": {"type": etype, "message": reply.error_message}}
            resp = await self._stream(request, req, reply, events, fmt, headers={"request-id": req_id}, error_event=error_event)
            self._finish(req, reply, 200, message)
            return resp

    async def _handle_count_tokens(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/messages/count_tokens: rough estimate."""
        try:
            body = await self._read_json(request)
            if not isinstance(body.get("messages"), list):
                raise _BadRequest("messages: Field required")
        except _BadRequest as exc:
            self._reject(request, str(exc))
            return self._anthropic_error(400, str(exc))[0]
        with self._lock:
            self.count_tokens_requests.append(body)
        tokens = _estimate_tokens(_content_text(body.get("system")), body["messages"], body.get("tools"))
        return web.json_response({"input_tokens": tokens})

    # ---- OpenAI ----------------------------------------------------------------------------------

    @staticmethod
    def _openai_error(
        status: int, message: str, etype: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[web.Response, dict[str, Any]]:
        """JSON error in OpenAI's shape."""
        default_type, code = _OPENAI_ERRORS.get(status) or (
            ("server_error", None) if status >= 500 else ("invalid_request_error", None)
        )
        body = {"error": {"message": message, "type": etype or default_type, "param": None, "code": code}}
        req_id = _rand_id("req_", 32)
        return web.json_response(body, status=status, headers={"x-request-id": req_id, **(headers or {})}), body

    async def _handle_openai(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions."""
        try:
            body = await self._read_json(request)
            if not isinstance(body.get("model"), str):
                raise _BadRequest("you must provide a model parameter")
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                raise _BadRequest("'messages' must be a non-empty array")
        except _BadRequest as exc:
            self._reject(request, str(exc))
            return self._openai_error(400, str(exc))[0]
        messages = body["messages"]
        req = Request(
            api="openai",
            model=body["model"],
            system=_openai_system(messages),
            messages=messages,
            tools=list(body.get("tools") or []),
            stream=bool(body.get("stream")),
            received_at=time.monotonic(),
            raw=body,
            path=request.path_qs,
            headers=dict(request.headers),
        )
        self._log(req)
        with self._recording(req):
            reply = await self._scripted(req, self._openai_error)
            if not isinstance(reply, Reply):
                return reply  # the scripted error
            turn = _make_turn(reply, req, "call_", 24)
            cid, created = _rand_id("chatcmpl-", 29), int(time.time())
            completion = _openai_completion(turn, req.model, cid, created)
            headers = {"x-request-id": _rand_id("req_", 32)}
            if not req.stream and not reply.malformed:
                self._finish(req, reply, 200, completion)
                return web.json_response(completion, headers={**headers, **reply.headers})

            def fmt(payload: dict[str, Any]) -> bytes:
                """OpenAI SSE framing: unnamed data-only events."""
                return f"data: {json.dumps(payload)}\n\n".encode()

            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _openai_chunks(turn, req.model, cid, created, include_usage)
            if reply.malformed:
                return await self._garbage(request, req, reply, completion, chunks, fmt, trailer=_DONE, headers=headers)
            etype, code = _OPENAI_ERRORS.get(reply.error_status or 500, ("server_error", None))
            error = {"message": reply.error_message, "type": reply.error_type or etype, "param": None, "code": code}
            resp = await self._stream(
                request, req, reply, chunks, fmt, trailer=_DONE, headers=headers, error_event={"error": error}
            )
            self._finish(req, reply, 200, completion)
            return resp

    # ---- misc endpoints --------------------------------------------------------------------------

    def _known_models(self) -> list[str]:
        """Scripted (non-wildcard) model keys plus models seen so far, or a placeholder."""
        with self._lock:
            names = [k for k in (*self._queues, *self._responders) if k and not k.endswith("*")]
            names += [r.model for r in self.requests]
        return list(dict.fromkeys(names)) or ["fake-model"]

    @staticmethod
    def _model_entry(model_id: str) -> dict[str, Any]:
        """A model object carrying both Anthropic's and OpenAI's fields (each SDK ignores the others)."""
        return {
            "id": model_id,
            "type": "model",
            "object": "model",
            "display_name": model_id,
            "created_at": "2025-01-01T00:00:00Z",
            "created": 1735689600,
            "owned_by": "fake",
        }

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        """GET /v1/models in a shape both SDKs' pagers accept."""
        data = [self._model_entry(m) for m in self._known_models()]
        return web.json_response(
            {"object": "list", "data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
        )

    async def _handle_model(self, request: web.Request) -> web.StreamResponse:
        """GET /v1/models/{id}: any id exists."""
        return web.json_response(self._model_entry(request.match_info["model_id"]))

    async def _handle_root(self, request: web.Request) -> web.StreamResponse:
        """GET/HEAD / liveness probe."""
        return web.json_response({"status": "ok"})

    async def _handle_not_found(self, request: web.Request) -> web.StreamResponse:
        """Unknown /v1 path: a 404 body that parses as both an Anthropic and an OpenAI error."""
        message = f"Not found: {request.method} {request.path}"
        body = {
            "type": "error",
            "error": {"type": "not_found_error", "message": message, "param": None, "code": "not_found"},
        }
        return web.json_response(body, status=404)
