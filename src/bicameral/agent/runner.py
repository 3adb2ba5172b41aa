"""The native agent loop: model → tool calls → results → model, until a final text."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bicameral.agent.breakers import Breakers
from bicameral.models.base import (
    MESSAGES,
    Block,
    Message,
    Model,
    ModelError,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    Usage,
    complete,
)
from bicameral.store.memory import blank_forgotten
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

# Returns text that arrived while the loop ran (one envelope), or None; called at tool boundaries.
DrainInjected = Callable[[], str | None]
# Observers of the loop: a tool about to run, and the transcript after each completed step.
OnTool = Callable[[ToolCall], Awaitable[None]]
OnStep = Callable[[list[Message]], None]
# Shortens a transcript that grew past its budget (or hands it back as it is); called before each model call.
Compact = Callable[[list[Message]], Awaitable[list[Message]]]


@dataclass
class RunResult:
    text: str
    messages: list[Message]
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    stop_reason: str | None = None  # why the loop was cut short (breaker, max iterations)
    error: ModelError | None = None


@dataclass
class NativeRunner:
    model: Model
    tools: ToolRegistry
    max_iterations: int = 20
    max_tokens: int = 4096
    max_errors: int = 3
    error_window_seconds: float = 60.0

    async def run(
        self,
        system: str,
        messages: list[Message],
        ctx: ToolContext,
        drain_injected: DrainInjected = lambda: None,
        on_tool: OnTool | None = None,
        on_step: OnStep | None = None,
        compact: Compact | None = None,
    ) -> RunResult:
        """Run the loop on `messages` (history plus the new user turn); never raises ModelError."""
        messages = list(messages)
        breakers = Breakers(self.max_errors, self.error_window_seconds)
        usage = Usage()
        forgotten = len(ctx.forgotten)
        for iteration in range(1, self.max_iterations + 1):
            # Offered afresh each step: words that joined the run (a note, an append) may have lowered its rights.
            specs = self.tools.specs(is_owner=ctx.is_owner)
            if compact is not None:
                shorter = await compact(messages)
                if shorter is not messages:
                    messages = list(shorter)
                    if on_step is not None:
                        on_step(messages)  # the compacted transcript is what a restart resumes from
            try:
                completion = await complete(self.model, system, messages, specs, self.max_tokens)
            except ModelError as exc:
                log.warning("model call failed (%s): %s", exc.kind, exc)
                return RunResult("", messages, usage, iteration, error=exc)
            usage = usage + completion.usage
            messages.append(completion.as_message())
            if not completion.tool_calls:
                return RunResult(completion.text.strip(), messages, usage, iteration)
            results: list[Block] = []
            for call in completion.tool_calls:
                if breakers.tripped or breakers.before_call(call.name, call.input):
                    results.append(ToolResultBlock(tool_use_id=call.id, content="not run: turn stopped", is_error=True))
                    continue
                if on_tool is not None:
                    await on_tool(call)
                result = await self.tools.execute(call.name, call.input, ctx)
                breakers.after_call(call.name, result.is_error)
                results.append(ToolResultBlock(tool_use_id=call.id, content=result.content, is_error=result.is_error))
            injected = drain_injected()
            if injected:
                results.append(TextBlock(text=injected))
            messages.append(Message(role="user", content=results))
            if len(ctx.forgotten) > forgotten:
                # A fact forgotten in this step must not ride along in the rest of the run (or in what is saved).
                forgotten = len(ctx.forgotten)
                messages = MESSAGES.validate_python(blank_forgotten(MESSAGES.dump_python(messages, mode="json"), ctx.forgotten))
            if on_step is not None:
                on_step(messages)
            if breakers.tripped:
                return RunResult(completion.text.strip(), _closed(messages), usage, iteration, stop_reason=breakers.tripped)
        return RunResult("", _closed(messages), usage, self.max_iterations, stop_reason="it hit the step limit")


def _closed(messages: list[Message]) -> list[Message]:
    """End the transcript on an assistant message so the next turn's user message alternates."""
    if messages and messages[-1].role == "user":
        return messages + [Message.assistant("(stopped here)")]
    return messages
