"""OpenAI Chat Completions adapter: works with OpenAI and any compatible server."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

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
from bicameral.models.sse import ServerEvent

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_STOP_REASONS = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end_turn", "length": "max_tokens"}
_DONE = "[DONE]"


class OpenAIModel(RemoteModel):
    """A chat model behind `/chat/completions`."""

    default_base_url = DEFAULT_BASE_URL
    path = "/chat/completions"
    provider = "openai"
    service = "the OpenAI endpoint"
    key_setting = "OPENAI_API_KEY"
    missing_key = (
        f"{key_setting} is not set; add it to .env or the environment "
        "(or set OPENAI_BASE_URL for a local OpenAI-compatible server)"
    )

    def _headers(self) -> dict[str, str]:
        # A local server needs no key; sending none is better than a made-up one.
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _body(self, system: str, messages: list[Message], max_tokens: int) -> dict[str, Any]:
        params = build_request(system, messages, [], self.data_dir)
        # Official OpenAI reasoning models reject `max_tokens`; older compatible servers only know it.
        official = not self.base_url or "api.openai.com" in self.base_url
        params["max_completion_tokens" if official else "max_tokens"] = max_tokens
        return {"model": self.model, "stream": True, "stream_options": {"include_usage": True}, **params}

    def _tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return tool_params(tools)

    def _reader(self) -> _StreamReader:
        return _StreamReader(self)

    def error_answer(self, status: int, body: Any) -> ModelError:
        inner = body.get("error", body) if isinstance(body, dict) else None
        if not isinstance(inner, dict):
            return self.status_error(status, body[:300] if isinstance(body, str) else "")
        message = inner.get("message")
        overloaded = "overloaded" in f"{inner.get('type') or ''} {inner.get('code') or ''}"
        return self.status_error(status, message[:300] if isinstance(message, str) else "", overloaded=overloaded)


def build_request(
    system: str, messages: list[Message], tools: list[ToolSpec], data_dir: Path
) -> dict[str, Any]:
    """The `messages` and `tools` of a Chat Completions request."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant_message(message))
        else:
            out.extend(_user_messages(message, data_dir))
    params: dict[str, Any] = {"messages": out}
    if tools:
        params["tools"] = tool_params(tools)
    return params


def tool_params(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """The `tools` of a Chat Completions request."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
        for t in tools
    ]


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
    """Accumulates chat.completion.chunk deltas; tool calls are only complete at the end."""

    def __init__(self, model: OpenAIModel) -> None:
        self._model = model
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Usage | None = None
        self._finish_reason: str | None = None
        self._answered = False  # a chunk carried a choice: a stream of none is no reply at all
        self._done = False

    def feed(self, event: ServerEvent) -> list[ModelEvent]:
        if self._done or event.data.startswith(_DONE):
            self._done = True
            return []
        chunk = json.loads(event.data)
        if not isinstance(chunk, dict):
            return []
        if isinstance(chunk.get("error"), dict):
            # An error object in place of a chunk: the far end gave up after the status line was out.
            raise self._model.error_answer(200, chunk)
        if usage := chunk.get("usage"):
            self._usage = _usage(usage)
        out: list[ModelEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            self._answered = True
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
        if not self._answered:
            raise self._model.error("server", "the OpenAI endpoint sent a reply without any choices")
        if self._finish_reason is None:
            # A stream closed without its final chunk must not pass for a complete reply.
            raise self._model.error("connection", "the OpenAI stream ended before the reply was complete")
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
