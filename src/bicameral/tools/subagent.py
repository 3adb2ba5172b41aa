"""`sub_agent`: hands a self-contained task to a fresh agent loop with a restricted tool set and returns its answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, Field

from bicameral.tools.base import Tool, ToolContext, ToolResult

# Runs one delegated task to its final text; the app wires it to the agent loop (a layer above tools).
Delegate = Callable[[str, ToolContext], Awaitable[ToolResult]]

# What a sub-agent may use: reading, searching, the workspace, the sandbox and the web. Named one by one so a
# new tool stays out until someone decides it belongs: no messaging, no scheduling, no memory or instruction
# writes, no learnings, and no sub_agent (no recursion). Owner-only tools among these stay the owner's.
SUB_AGENT_TOOLS = frozenset({
    "current_time",
    "recall", "memory_stats", "history_search", "recent_messages", "database_query",
    "read_file", "write_file", "edit_file", "list_files", "search_files", "run",
    "web_fetch", "web_search",
})


class SubAgentArgs(BaseModel):
    task: str = Field(
        min_length=1,
        max_length=20_000,
        description="A self-contained task: everything the helper needs to know (it sees nothing else) and what to return.",
    )


class SubAgent(Tool[SubAgentArgs]):
    name = "sub_agent"
    description = (
        "Delegate a self-contained piece of research or coding to a helper agent with its own step limit. It can read, "
        "search, use the workspace, the sandbox and the web, but cannot message anyone, schedule or change memory. "
        "Returns its final answer."
    )
    args_model = SubAgentArgs
    # The delegate offers the helper only what the caller may use, so it is no wider than the caller's own tools.
    owner_only = False

    def __init__(self, delegate: Delegate | None = None) -> None:
        self._delegate = delegate

    async def run(self, args: SubAgentArgs, ctx: ToolContext) -> ToolResult:
        if self._delegate is None:
            return ToolResult.error("sub_agent is not available with this executor; do the task yourself")
        return await self._delegate(args.task, ctx)
