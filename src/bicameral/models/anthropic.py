"""Anthropic Messages API adapter: streaming, prompt caching, typed errors."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic

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

DEFAULT_BASE_URL = "https://api.anthropic.com"
_EPHEMERAL = {"type": "ephemeral"}


class AnthropicModel(RemoteModel[anthropic.AsyncAnthropic]):
    """A Claude model behind the Messages API (or a compatible gateway)."""

    default_base_url = DEFAULT_BASE_URL
    provider = "anthropic"
    service = "Anthropic"
    key_setting = "ANTHROPIC_API_KEY"
    missing_key = f"{key_setting} is not set; add it to .env or the environment (or point ANTHROPIC_BASE_URL at a gateway)"
    sdk_timeout = anthropic.APITimeoutError
    sdk_unreachable = anthropic.APIConnectionError
    sdk_errors = anthropic.AnthropicError

    def _new_client(self, **options: Any) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(**options)

    async def _stream(
        self,
        client: anthropic.AsyncAnthropic,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec],
        max_tokens: int,
    ) -> AsyncIterator[ModelEvent]:
        params = build_request(system, messages, tools, self.data_dir)
        reader = _StreamReader()
        response = await client.messages.create(model=self.model, max_tokens=max_tokens, stream=True, **params)
        async with response:
            self.expect_event_stream(response.response)
            async for event in response:
                for out in reader.feed(event):
                    yield out
        if not reader.finished:
            # A stream cut off without an error event must not pass for a complete reply.
            raise self.error("connection", "the Anthropic stream ended before the reply was complete")

    def _sdk_error(self, err: Exception) -> ModelError:
        if isinstance(err, anthropic.APIStatusError):
            detail = err.api_message or (err.body if isinstance(err.body, str) else None) or ""
            return self.status_error(
                err.status_code, detail, overloaded=err.type == "overloaded_error", body_kind=_BODY_KINDS.get(err.type or "")
            )
        if isinstance(err, anthropic.APIError):
            return self.error("server", f"unexpected Anthropic response: {err.message}")
        # e.g. CredentialsError: raised before any request is sent.
        return self.error("auth", f"Anthropic client error: {err}")


def build_request(
    system: str, messages: list[Message], tools: list[ToolSpec], data_dir: Path
) -> dict[str, Any]:
    """The `system`/`tools`/`messages` arguments, with cache breakpoints on each prefix end."""
    params: dict[str, Any] = {"messages": _convert_messages(messages, data_dir)}
    if system:
        params["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
    if tools:
        converted = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools
        ]
        converted[-1]["cache_control"] = dict(_EPHEMERAL)
        params["tools"] = converted
    if params["messages"]:
        # Marking the newest block caches the whole conversation for the next call.
        params["messages"][-1]["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    return params


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
    """Turns raw Messages stream events into our events."""

    def __init__(self) -> None:
        self._tools: dict[int, tuple[str, str, list[str]]] = {}
        self._usage: dict[str, int] = {}
        self._stop_reason = "end_turn"
        self.finished = False

    def feed(self, event: Any) -> list[ModelEvent]:
        kind = event.type
        if kind == "message_start":
            self._take_usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self._tools[event.index] = (block.id, block.name, [])
            elif block.type == "text" and block.text:
                return [TextDelta(block.text)]
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                return [TextDelta(delta.text)]
            if delta.type == "input_json_delta" and event.index in self._tools:
                self._tools[event.index][2].append(delta.partial_json)
        elif kind == "content_block_stop" and event.index in self._tools:
            tool_id, name, parts = self._tools.pop(event.index)
            return [ToolCall(tool_id, name, parse_tool_input("".join(parts)))]
        elif kind == "message_delta":
            if event.delta.stop_reason:
                self._stop_reason = event.delta.stop_reason
            self._take_usage(event.usage)
        elif kind == "message_stop":
            return self._finish()
        return []

    def _finish(self) -> list[ModelEvent]:
        if self.finished:
            return []
        self.finished = True
        usage = Usage(
            input_tokens=self._usage.get("input_tokens", 0),
            output_tokens=self._usage.get("output_tokens", 0),
            cache_read_tokens=self._usage.get("cache_read_input_tokens", 0),
            cache_write_tokens=self._usage.get("cache_creation_input_tokens", 0),
        )
        return [usage, Stop(self._stop_reason)]

    def _take_usage(self, usage: Any) -> None:
        # message_delta counts are cumulative, so later values replace earlier ones.
        for field in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = getattr(usage, field, None)
            if value is not None:
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
