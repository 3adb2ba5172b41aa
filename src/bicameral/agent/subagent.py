"""The sub-agent: a fresh agent loop over the restricted tools, run inside the caller's tool call."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bicameral import prompts
from bicameral.agent.runner import NativeRunner
from bicameral.events import Action, ActionResult
from bicameral.failures import failure_sentence
from bicameral.models.base import Message
from bicameral.tools.base import ToolContext, ToolResult
from bicameral.tools.registry import ToolRegistry
from bicameral.tools.subagent import SUB_AGENT_TOOLS


async def _no_messages(action: Action) -> ActionResult:
    return ActionResult.failed("a sub-agent cannot message anyone; return the answer instead")


def restricted_tools(registry: ToolRegistry) -> ToolRegistry:
    """The caller's registry cut down to what a sub-agent may use (the registry still enforces owner-only)."""
    return registry.subset(exclude_messaging=True, only=SUB_AGENT_TOOLS)


@dataclass
class SubAgentRunner:
    """A `Delegate` for the sub_agent tool: runs the task to a final text on its own loop and step limit."""

    runner: NativeRunner  # over `restricted_tools`, with the sub-agent's iteration cap

    async def __call__(self, task: str, ctx: ToolContext) -> ToolResult:
        """Run the task in a loop of its own; cancelling the caller cancels it, as it runs in the caller's await."""
        # Same chat, owner and memory reach as the caller; nothing it does can reach the user directly.
        own = replace(ctx, perform=_no_messages, sent_message_ids=[], message_ids=())
        result = await self.runner.run(prompts.load("sub_agent.md"), [Message.user(task)], own)
        # What it read comes back in its answer: untrusted content it read taints the caller's run too.
        ctx.tainted_by = ctx.tainted_by or own.tainted_by
        if result.error is not None:
            return ToolResult.error(f"the sub-agent could not finish: {failure_sentence(result.error.kind)}")
        if result.stop_reason:
            said = f"{result.text}\n\n" if result.text else ""
            return ToolResult(f"{said}[the sub-agent stopped because {result.stop_reason}]", is_error=not result.text)
        return ToolResult(result.text or "(the sub-agent finished with nothing to report)")
