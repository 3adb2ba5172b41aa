"""Anthropic Messages API adapter: streaming, prompt caching, typed errors."""

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

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_EPHEMERAL = {"type": "ephemeral"}


class AnthropicModel(RemoteModel):
    """A Claude model behind the Messages API (or a compatible gateway)."""

    default_base_url = DEFAULT_BASE_URL
    path = "/v1/messages"
    provider = "anthropic"
    service = "Anthropic"
    key_setting = "ANTHROPIC_API_KEY"
    missing_key = f"{key_setting} is not set; add it to .env or the environment (or point ANTHROPIC_BASE_URL at a gateway)"

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _body(self, system: str, messages: list[Message], max_tokens: int) -> dict[str, Any]:
        params = build_request(system, messages, [], self.data_dir)
        return {"model": self.model, "max_tokens": max_tokens, "stream": True, **params}

    def _tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return tool_params(tools)

    def _reader(self) -> _StreamReader:
        return _StreamReader(self)

    def error_answer(self, status: int, body: Any) -> ModelError:
        inner = body.get("error") if isinstance(body, dict) else None
        if not isinstance(inner, dict):
            return self.status_error(status, body[:300] if isinstance(body, str) else "")
        kind = inner.get("type")
        kind = kind if isinstance(kind, str) else ""
        message = inner.get("message")
        return self.status_error(
            status,
            message[:300] if isinstance(message, str) else "",
            overloaded=kind == "overloaded_error",
            body_kind=_BODY_KINDS.get(kind),
        )


def build_request(
    system: str, messages: list[Message], tools: list[ToolSpec], data_dir: Path
) -> dict[str, Any]:
    """The `system`/`tools`/`messages` arguments, with cache breakpoints on each prefix end."""
    params: dict[str, Any] = {"messages": _convert_messages(messages, data_dir)}
    if system:
        params["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
    if tools:
        params["tools"] = tool_params(tools)
    if params["messages"]:
        # Marking the newest block caches the whole conversation for the next call.
        params["messages"][-1]["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    return params


def tool_params(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """The `tools` of a Messages request, a cache breakpoint on the last (they come before the system prompt)."""
    converted = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]
    if converted:
        converted[-1]["cache_control"] = dict(_EPHEMERAL)
    return converted


# --- conversion ---


def _convert_messages(messages: list[Message], data_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = [b for b in (_convert_block(b, data_dir) for b in message.content) if b is not None]
        if not blocks:
            continue
        if out and out[-1]["role"] == message.role:
            # The API requires strict user/assistant alternation.
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": message.role, "content": blocks})
    for turn in out:
        if turn["role"] == "user":
            # tool_result blocks must lead a user turn; merging can put text before them.
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return out


def _convert_block(block: Any, data_dir: Path) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # The API rejects empty text blocks.
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ImageBlock):
        data = read_image(data_dir, block.path)
        if data is None:
            return {"type": "text", "text": f"[image unavailable: {block.path}]"}
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": block.media_type,
                "data": base64.b64encode(data).decode("ascii"),
            },
        }
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": block.content,
            "is_error": block.is_error,
        }
    return None


# --- streaming ---


class _StreamReader:
    """Turns Messages stream events into our events."""

    def __init__(self, model: AnthropicModel) -> None:
        self._model = model
        self._tools: dict[int, tuple[str, str, list[str]]] = {}
        self._usage: dict[str, int] = {}
        self._stop_reason = "end_turn"
        self._finished = False

    def feed(self, event: ServerEvent) -> list[ModelEvent]:
        data = json.loads(event.data)
        kind = data["type"]
        if kind == "error":
            raise self._model.error_answer(200, data)
        if kind == "message_start":
            self._take_usage(data["message"].get("usage"))
        elif kind == "content_block_start":
            block = data["content_block"]
            if block["type"] == "tool_use":
                self._tools[data["index"]] = (block["id"], block["name"], [])
            elif block["type"] == "text" and block.get("text"):
                return [TextDelta(block["text"])]
        elif kind == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta" and delta.get("text"):
                return [TextDelta(delta["text"])]
            if delta["type"] == "input_json_delta" and data["index"] in self._tools:
                self._tools[data["index"]][2].append(delta["partial_json"])
        elif kind == "content_block_stop" and data["index"] in self._tools:
            tool_id, name, parts = self._tools.pop(data["index"])
            return [ToolCall(tool_id, name, parse_tool_input("".join(parts)))]
        elif kind == "message_delta":
            if stop_reason := data["delta"].get("stop_reason"):
                self._stop_reason = stop_reason
            self._take_usage(data.get("usage"))
        elif kind == "message_stop" and not self._finished:
            self._finished = True
            usage = Usage(
                input_tokens=self._usage.get("input_tokens", 0),
                output_tokens=self._usage.get("output_tokens", 0),
                cache_read_tokens=self._usage.get("cache_read_input_tokens", 0),
                cache_write_tokens=self._usage.get("cache_creation_input_tokens", 0),
            )
            return [usage, Stop(self._stop_reason)]
        return []

    def finish(self) -> list[ModelEvent]:
        if not self._finished:
            # A stream cut off without an error event must not pass for a complete reply.
            raise self._model.error("connection", "the Anthropic stream ended before the reply was complete")
        return []

    def _take_usage(self, usage: Any) -> None:
        # message_delta counts are cumulative, so later values replace earlier ones.
        if not isinstance(usage, dict):
            return
        for field in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = usage.get(field)
            if isinstance(value, int):
                self._usage[field] = value


# --- errors ---

_BODY_KINDS = {
    "rate_limit_error": "rate_limit",
    "overloaded_error": "overloaded",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_request_error": "bad_request",
    "request_too_large": "bad_request",
    "not_found_error": "bad_request",
    "api_error": "server",
    "timeout_error": "timeout",
}
