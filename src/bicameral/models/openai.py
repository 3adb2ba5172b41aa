"""OpenAI Chat Completions adapter: works with OpenAI and any compatible server."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import openai

from bicameral.models.base import (
    ImageBlock,
    Message,
    ModelError,
    ModelEvent,
    Stop,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
    parse_tool_input,
    read_image,
)
from bicameral.redaction import Redactor

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (llama.cpp, vLLM, Ollama) ignore the key, but the SDK refuses to run without one.
_PLACEHOLDER_KEY = "not-needed"
_STOP_REASONS = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end_turn", "length": "max_tokens"}


class OpenAIModel:
    """A chat model behind `/chat/completions`."""

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
        self.name = f"openai:{model}"
        self.model = model
        self.data_dir = Path(data_dir)
        self._api_key = api_key
        self._base_url = base_url
        self._max_retries = max_retries
        self._timeout = timeout
        self._http_client = http_client
        self._client: openai.AsyncOpenAI | None = None

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        """One completion as a stream of events; raises ModelError on failure."""
        client = self._get_client()
        params = build_request(system, messages, tools, self.data_dir)
        # Official OpenAI reasoning models reject `max_tokens`; older compatible servers only know it.
        official = not self._base_url or "api.openai.com" in self._base_url
        params["max_completion_tokens" if official else "max_tokens"] = max_tokens
        reader = _StreamReader()
        try:
            # Posted as is: `build_request` already produced plain JSON, and the SDK's TypedDict walk in
            # `chat.completions.create` costs milliseconds per request, growing with the history.
            response = await client.post(
                "/chat/completions",
                body={"model": self.model, "stream": True, "stream_options": {"include_usage": True}, **params},
                cast_to=object,
                options={"security": {"bearer_auth": True}},
                stream=True,
                # Chunks as the parsed JSON: building SDK models for every chunk costs more than the rest
                # of the request path together.
                stream_cls=openai.AsyncStream[object],
            )
            async with response:
                async for chunk in response:
                    for out in reader.feed(chunk):
                        yield out
        except openai.APIError as err:
            raise _model_error(err, self._secrets(), self._timeout) from None
        except httpx2.TimeoutException:
            raise ModelError("timeout", _timeout_text(self._timeout), retryable=True) from None
        except httpx2.TransportError as err:
            text = Redactor(self._secrets())(f"lost the connection to the OpenAI endpoint mid-reply: {err}")
            raise ModelError("connection", text, retryable=True) from None
        for out in reader.finish():
            yield out

    async def aclose(self) -> None:
        """Release the HTTP connection pool (a shared `http_client` is left to its owner)."""
        if self._client is not None and self._http_client is None:
            await self._client.close()
        self._client = None

    # --- private ---

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            if not self._api_key and not self._base_url:
                raise ModelError(
                    "auth",
                    "OPENAI_API_KEY is not set; add it to .env or the environment "
                    "(or set OPENAI_BASE_URL for a local OpenAI-compatible server)",
                )
            # Everything is passed explicitly so the SDK never falls back to env vars.
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key or _PLACEHOLDER_KEY,
                base_url=self._base_url or DEFAULT_BASE_URL,
                max_retries=self._max_retries,
                timeout=self._timeout,
                http_client=self._http_client,
            )
        return self._client

    def _secrets(self) -> list[str]:
        return [self._api_key] if self._api_key else []


def build_request(
    system: str, messages: list[Message], tools: list[ToolSpec], data_dir: Path
) -> dict[str, Any]:
    """The `messages` and `tools` arguments for chat.completions.create."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant_message(message))
        else:
            out.extend(_user_messages(message, data_dir))
    params: dict[str, Any] = {"messages": out}
    if tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in tools
        ]
    return params


# --- conversion ---


def _assistant_message(message: Message) -> dict[str, Any]:
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)},
        }
        for b in message.content
        if isinstance(b, ToolUseBlock)
    ]
    result: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        result["tool_calls"] = calls
    return result


def _user_messages(message: Message, data_dir: Path) -> list[dict[str, Any]]:
    # Tool results become "tool" messages, which must directly follow the assistant's tool_calls.
    out: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_call_id": b.tool_use_id,
            "content": f"ERROR: {b.content}" if b.is_error else b.content,
        }
        for b in message.content
        if isinstance(b, ToolResultBlock)
    ]
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock) and block.text:
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            data = read_image(data_dir, block.path)
            if data is None:
                parts.append({"type": "text", "text": f"[image unavailable: {block.path}]"})
            else:
                url = f"data:{block.media_type};base64,{base64.b64encode(data).decode('ascii')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
    if any(p["type"] == "image_url" for p in parts):
        out.append({"role": "user", "content": parts})
    elif parts:
        # Plain string content is what every compatible server understands.
        out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
    return out


# --- streaming ---


class _StreamReader:
    """Accumulates chat.completion.chunk deltas (parsed JSON); tool calls are only complete at the end."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Usage | None = None
        self._finish_reason: str | None = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        if not isinstance(chunk, dict):
            return []
        if usage := chunk.get("usage"):
            self._usage = _usage(usage)
        out: list[ModelEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not delta:
                continue
            if delta.get("content"):
                out.append(TextDelta(delta["content"]))
            for call in delta.get("tool_calls") or []:
                slot = self._calls.setdefault(call.get("index", 0), {"id": None, "name": "", "arguments": []})
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["name"] += function["name"]
                if function.get("arguments"):
                    slot["arguments"].append(function["arguments"])
        return out

    def finish(self) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for index in sorted(self._calls):
            slot = self._calls[index]
            raw = "".join(slot["arguments"])
            out.append(ToolCall(slot["id"] or f"call_{index}", slot["name"], parse_tool_input(raw)))
        if self._usage is not None:
            out.append(self._usage)
        reason = _STOP_REASONS.get(self._finish_reason or "stop", self._finish_reason or "end_turn")
        # Some compatible servers report "stop" even when the turn ends in tool calls.
        out.append(Stop("tool_use" if self._calls else reason))
        return out


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    # OpenAI counts cached tokens inside prompt_tokens; Anthropic (and our Usage) keeps them apart.
    return Usage(
        input_tokens=max((usage.get("prompt_tokens") or 0) - cached, 0),
        output_tokens=usage.get("completion_tokens") or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


# --- errors ---

_RETRYABLE = {"rate_limit", "overloaded", "server", "connection", "timeout"}
_HEADLINES = {
    "rate_limit": "OpenAI rate limit reached",
    "overloaded": "the OpenAI endpoint is overloaded",
    "auth": "the OpenAI endpoint rejected the credentials",
    "bad_request": "the OpenAI endpoint rejected the request",
    "server": "the OpenAI endpoint had a server error",
}


def _model_error(err: openai.APIError, secrets: list[str], timeout: float) -> ModelError:
    if isinstance(err, openai.APITimeoutError):
        return ModelError("timeout", _timeout_text(timeout), retryable=True)
    if isinstance(err, openai.APIConnectionError):
        return ModelError("connection", "could not connect to the OpenAI endpoint", retryable=True)
    detail = _detail(err)
    if not isinstance(err, openai.APIStatusError):
        # An error object inside an otherwise successful stream.
        text = f"{_HEADLINES['server']} mid-stream" + (f": {detail}" if detail else "")
        return ModelError("server", Redactor(secrets)(text), retryable=True)
    kind = _status_kind(err)
    text = f"{_HEADLINES[kind]} (HTTP {err.status_code})" + (f": {detail}" if detail else "")
    if kind == "auth":
        text += "; check OPENAI_API_KEY"
    return ModelError(kind, Redactor(secrets)(text), retryable=kind in _RETRYABLE)


def _status_kind(err: openai.APIStatusError) -> str:
    code = err.status_code
    if code == 529 or "overloaded" in f"{err.type or ''} {err.code or ''}":
        return "overloaded"
    if isinstance(err, openai.RateLimitError) or code == 429:
        return "rate_limit"
    if isinstance(err, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return "auth"
    if code >= 500:
        return "server"
    return "bad_request"


def _detail(err: openai.APIError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str):
            return message[:300]
    return body[:300] if isinstance(body, str) else ""


def _timeout_text(timeout: float) -> str:
    return f"the OpenAI endpoint did not answer within {timeout:g}s"
