"""`run`: a shell command in the chat's workspace, inside the bubblewrap sandbox, one at a time per chat."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from bicameral.sandbox.runner import Sandbox
from bicameral.sandbox.workspace import sandbox_workspace
from bicameral.tools.base import Tool, ToolContext, ToolResult


class RunArgs(BaseModel):
    command: str = Field(min_length=1, max_length=10_000, description="A shell command line, run by /bin/sh -c.")


class RunCommand(Tool[RunArgs]):
    name = "run"
    description = (
        "Run a shell command in this chat's workspace inside a sandbox: Python 3 and the usual command-line tools, "
        "the workspace at /workspace (read-write), no network, limits on CPU, memory, processes, file size, the "
        "workspace's size and time; long output is cut in the middle. One command at a time per chat."
    )
    args_model = RunArgs
    runs_programs = True
    # Inside the workspace only: the sandbox never has the network (sandbox/bwrap.py unshares it).
    acts_outside = False

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self._sandbox = sandbox or Sandbox()
        self._busy: set[str] = set()
        self._why_off: str | None = None
        self._checked = False

    async def why_off(self) -> str | None:
        """Why the sandbox cannot run here (checked once), or None when it can."""
        if not self._checked:
            self._why_off = await self._sandbox.unavailable()
            self._checked = True
        return self._why_off

    async def run(self, args: RunArgs, ctx: ToolContext) -> ToolResult:
        if why := await self.why_off():
            return ToolResult.error(f"the sandbox is off on this machine: {why}")
        if ctx.chat in self._busy:
            return ToolResult.error("another command is still running in this chat; wait for it to finish")
        self._busy.add(ctx.chat)
        try:
            workspace = await asyncio.to_thread(sandbox_workspace, ctx.data_dir, ctx.chat)
            result = await self._sandbox.run(workspace, args.command)
        finally:
            self._busy.discard(ctx.chat)
        report = result.report(self._sandbox.limits)
        return ToolResult(report, is_error=result.failed)
