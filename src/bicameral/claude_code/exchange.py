"""One turn across the worker boundary: the prompt in, the outcome out, and the ledger kept meanwhile."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bicameral.agent.breakers import Breakers
from bicameral.claude_code.failures import Failure
from bicameral.claude_code.stream import Result, ToolUse
from bicameral.models.base import ImageBlock, read_image

# What the CLI's API accepts inline; a larger or other image is left out rather than failing the turn.
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
_IMAGE_MAX_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class PromptImage:
    media_type: str
    data: bytes


def prompt_images(data_dir: Path, blocks: Iterable[ImageBlock]) -> tuple[PromptImage, ...]:
    """The readable images among `blocks`, with their bytes, for one CLI message."""
    images = []
    for block in blocks:
        if block.media_type in _IMAGE_TYPES:
            data = read_image(data_dir, block.path)
            if data is not None and len(data) <= _IMAGE_MAX_BYTES:
                images.append(PromptImage(block.media_type, data))
    return tuple(images)


@dataclass(frozen=True)
class Prompt:
    """What one user message to the CLI carries: text and optional images."""

    text: str
    images: tuple[PromptImage, ...] = ()

    def stream_message(self, message_uuid: str) -> dict[str, Any]:
        """The stream-json `user` message that carries this prompt."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": self.text}]
        for image in self.images:
            source = {"type": "base64", "media_type": image.media_type, "data": base64.b64encode(image.data).decode()}
            blocks.append({"type": "image", "source": source})
        message = {"role": "user", "content": blocks}
        return {"type": "user", "uuid": message_uuid, "parent_tool_use_id": None, "message": message}


@dataclass
class TurnOutcome:
    """What one turn produced, for the caller to act on."""

    session_id: str = ""
    result: Result | None = None
    texts: list[str] = field(default_factory=list)  # what the model wrote (top level)
    synthetic: list[str] = field(default_factory=list)  # what the CLI wrote in the model's place (API errors)
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_errors: int = 0
    stop_reason: str | None = None  # why the tool-error breaker stopped the turn
    failure: Failure | None = None
    restarts: int = 0
    injected: int = 0
    unfinished: bool = False  # it failed on a message injected after part of the turn was answered
    context_tokens: int = 0  # input tokens of the turn's last model call: how full the session's context is

    @property
    def ok(self) -> bool:
        return self.failure is None and self.stop_reason is None

    @property
    def final_text(self) -> str:
        return self.texts[-1] if self.texts else ""


@dataclass
class TurnLedger:
    """One turn's bookkeeping: which prompts are with the CLI, which a result covered, what to redo."""

    pid: int | None
    breakers: Breakers
    written: dict[str, Prompt] = field(default_factory=dict)  # every prompt of the turn, by uuid
    pending: set[str] = field(default_factory=set)  # written, not yet taken by the CLI
    settled: set[str] = field(default_factory=set)  # covered by a CLI result
    handled_exits: set[int] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)  # tool_use id -> tool name
    interrupted_at: float | None = None
    result_at: float | None = None  # a result came while an injected prompt was still pending

    def sent(self, message_uuid: str, prompt: Prompt) -> None:
        self.written[message_uuid] = prompt
        self.pending.add(message_uuid)

    def settle(self) -> None:
        self.settled |= set(self.written) - self.pending

    def unsettled(self) -> list[Prompt]:
        return [p for message_uuid, p in self.written.items() if message_uuid not in self.settled]

    def restart(self, message_uuid: str, prompt: Prompt, pid: int | None) -> None:
        """A new process got the unsettled prompts again as one message."""
        self.written, self.pending, self.settled = {message_uuid: prompt}, {message_uuid}, set()
        self.pid = pid
        self.result_at = self.interrupted_at = None


def merged(prompts: Iterable[Prompt]) -> Prompt:
    """Several prompts as one message."""
    prompts = list(prompts)
    return Prompt(text="\n".join(p.text for p in prompts), images=tuple(i for p in prompts for i in p.images))


def continuation(sent: Iterable[Prompt], reason: str) -> Prompt:
    """The turn again after a restart, with a note so a model that already answered does not repeat itself."""
    note = (
        f"<system>Your process was restarted while you were working on this ({reason}). The message(s) you were "
        "handling follow again. If you already answered them, do not answer again; otherwise carry on.</system>"
    )
    return merged([Prompt(note), *sent])
