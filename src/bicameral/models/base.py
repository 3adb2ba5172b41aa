"""The completion API contract: messages + tools + system in, a stream of events out."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Field, TypeAdapter

from bicameral.folders import resolve_under

# --- conversation content (JSON-serialisable, so sessions persist as-is) ---


class TextBlock(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ImageBlock(BaseModel):
    """An image by path under the data dir: bytes are read per request and never stored."""

    type: Literal["image"] = "image"
    path: str
    media_type: str = "image/jpeg"


class ToolUseBlock(BaseModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(BaseModel):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


Block = Annotated[TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(BaseModel):
    role: Literal["user", "assistant"]
    content: list[Block]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", content=[TextBlock(text=text)])

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


MESSAGES = TypeAdapter(list[Message])


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


# --- stream events ---


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]

    def summary(self) -> str:
        """The call as a person reads it in a status line: name and the first few arguments, cut short."""
        return summarize_call(self.name, self.input)


def summarize_call(name: str, args: Mapping[str, Any]) -> str:
    """`name(key=value, ...)` with at most three arguments of 40 characters each."""
    shown = ", ".join(f"{key}={str(value)[:40]}" for key, value in list(args.items())[:3])
    return f"{name}({shown})"


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Stop:
    reason: str  # end_turn | tool_use | max_tokens | ...


ModelEvent = TextDelta | ToolCall | Usage | Stop


class ModelError(Exception):
    """A completion failed after the client's own retries; `kind` says how to talk about it."""

    def __init__(self, kind: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.kind = kind  # rate_limit | overloaded | auth | bad_request | server | connection | timeout
        self.retryable = retryable


class Model(Protocol):
    name: str

    async def aclose(self) -> None:
        """Release the client's connections; a model without any does nothing."""

    def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        """One completion as a stream of events; raises ModelError on failure."""


@dataclass
class Completion:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end_turn"

    def as_message(self) -> Message:
        content: list[Block] = [TextBlock(text=self.text)] if self.text else []
        content += [ToolUseBlock(id=c.id, name=c.name, input=c.input) for c in self.tool_calls]
        return Message(role="assistant", content=content or [TextBlock(text="")])


async def complete(
    model: Model, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
) -> Completion:
    """Drain a model stream into one Completion."""
    result = Completion()
    parts: list[str] = []
    async for event in model.stream(system, messages, tools, max_tokens):
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, ToolCall):
            result.tool_calls.append(event)
        elif isinstance(event, Usage):
            result.usage = result.usage + event
        elif isinstance(event, Stop):
            result.stop_reason = event.reason
    result.text = "".join(parts)
    return result


# --- helpers shared by the adapters ---


def read_image(data_dir: Path, path: str) -> bytes | None:
    """The bytes of an ImageBlock's file under the data dir, or None if missing or outside it."""
    # A stored path must never reach outside the data dir.
    target = resolve_under(data_dir, Path(data_dir) / path)
    if target is None:
        return None
    try:
        return target.read_bytes()
    except OSError:
        return None


def parse_tool_input(raw: str) -> dict[str, Any]:
    """Streamed tool arguments as a dict; unparseable text is kept under `_raw` for the runner to report."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}
