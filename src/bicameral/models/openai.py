"""OpenAI Chat Completions adapter: works with OpenAI and any compatible server."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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
from bicameral.models.remote import RemoteModel

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_STOP_REASONS = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end_turn", "length": "max_tokens"}


class OpenAIModel(RemoteModel[openai.AsyncOpenAI]):
    """A chat model behind `/chat/completions`."""

    default_base_url = DEFAULT_BASE_URL
    provider = "openai"
    service = "the OpenAI endpoint"
    key_setting = "OPENAI_API_KEY"
    missing_key = (
        f"{key_setting} is not set; add it to .env or the environment "
        "(or set OPENAI_BASE_URL for a local OpenAI-compatible server)"
    )
    sdk_timeout = openai.APITimeoutError
    sdk_unreachable = openai.APIConnectionError
    sdk_errors = openai.OpenAIError

    def _new_client(self, **options: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(**options)

    async def _stream(
        self, client: openai.AsyncOpenAI, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        params = build_request(system, messages, tools, self.data_dir)
        # Official OpenAI reasoning models reject `max_tokens`; older compatible servers only know it.
        official = not self.base_url or "api.openai.com" in self.base_url
        params["max_completion_tokens" if official else "max_tokens"] = max_tokens
        reader = _StreamReader()
        # Posted as is: `build_request` already produced plain JSON, and the SDK's TypedDict walk in
        # `chat.completions.create` costs milliseconds per request, growing with the history.
        response = await client.post(
            "/chat/completions",
            body={"model": self.model, "stream": True, "stream_options": {"include_usage": True}, **params},
            cast_to=object,
            options={"security": {"bearer_auth": True}},
            stream=True,
            # Chunks as the parsed JSON: building SDK models for every chunk costs more than the rest of
            # the request path together.
            stream_cls=openai.AsyncStream[object],
        )
        async with response:
            self.expect_event_stream(response.response)
            async for chunk in response:
                for out in reader.feed(chunk):
                    yield out
        if not reader.answered:
            raise self.error("server", "the OpenAI endpoint sent a reply without any choices")
        if reader.finish_reason is None:
            # A stream closed without its final chunk must not pass for a complete reply.
            raise self.error("connection", "the OpenAI stream ended before the reply was complete")
        for out in reader.finish():
            yield out

    def _sdk_error(self, err: Exception) -> ModelError:
        if isinstance(err, openai.APIError):
            overloaded = "overloaded" in f"{err.type or ''} {err.code or ''}"
            # Without a status it was an error object inside an otherwise successful (200) stream.
            status = err.status_code if isinstance(err, openai.APIStatusError) else 200
            return self.status_error(status, _detail(err), overloaded=overloaded)
        return self.error("auth", f"OpenAI client error: {err}")


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
        self.finish_reason: str | None = None
        self.answered = False  # a chunk carried a choice: a stream of none is no reply at all

    def feed(self, chunk: Any) -> list[ModelEvent]:
        if not isinstance(chunk, dict):
            return []
        if usage := chunk.get("usage"):
            self._usage = _usage(usage)
        out: list[ModelEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            self.answered = True
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
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
        reason = _STOP_REASONS.get(self.finish_reason or "stop", self.finish_reason or "end_turn")
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


def _detail(err: openai.APIError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str):
            return message[:300]
    return body[:300] if isinstance(body, str) else ""
