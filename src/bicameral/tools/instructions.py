"""Instruction tools for the owner: read, rewrite (with a backup) and undo the standing instructions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from bicameral.store.instructions import MAX_INSTRUCTION_CHARS, Instructions, InstructionsRefused
from bicameral.tools.base import Tool, ToolContext, ToolResult

Where = Literal["global", "chat"]
_WHERE = "'global' for every chat, 'chat' for this chat only."


class WhereArgs(BaseModel):
    where: Where = Field(description=_WHERE)


class WriteArgs(BaseModel):
    where: Where = Field(description=_WHERE)
    text: str = Field(max_length=MAX_INSTRUCTION_CHARS, description="The complete new instructions; empty clears them.")


class ReadInstructions(Tool[WhereArgs]):
    name = "instructions_read"
    description = "Owner only: the standing instructions (persona, house rules, language) for every chat or this chat."
    args_model = WhereArgs
    owner_only = True  # never even listed to anyone else

    async def run(self, args: WhereArgs, ctx: ToolContext) -> ToolResult:
        files = _instructions(ctx)
        if isinstance(files, ToolResult):
            return files
        text = files.read(args.where, ctx.chat)
        return ToolResult(text if text and text.strip() else f"(no {args.where} instructions yet)")


class WriteInstructions(Tool[WriteArgs]):
    name = "instructions_write"
    description = (
        "Owner only: replace the standing instructions for every chat or this chat. Read them first with "
        "instructions_read and keep what should stay; the old version is backed up and instructions_undo restores it."
    )
    args_model = WriteArgs
    owner_only = True  # never even listed to anyone else

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        files = _instructions(ctx)
        if isinstance(files, ToolResult):
            return files
        try:
            backup = files.write(args.where, ctx.chat, args.text)
        except InstructionsRefused as exc:
            return ToolResult.error(f"not written: {exc}")
        kept = f"; the previous version is kept as {backup.name}" if backup else ""
        return ToolResult(f"{args.where} instructions saved{kept}")


class UndoInstructions(Tool[WhereArgs]):
    name = "instructions_undo"
    description = "Owner only: put back the standing instructions as they were before the last change."
    args_model = WhereArgs
    owner_only = True  # never even listed to anyone else

    async def run(self, args: WhereArgs, ctx: ToolContext) -> ToolResult:
        files = _instructions(ctx)
        if isinstance(files, ToolResult):
            return files
        try:
            text = files.undo(args.where, ctx.chat)
        except InstructionsRefused as exc:
            return ToolResult.error(f"nothing undone: {exc}")
        return ToolResult(f"{args.where} instructions restored to:\n{text.strip() or '(empty)'}")


def _instructions(ctx: ToolContext) -> Instructions | ToolResult:
    """The instruction files, or the refusal to give when this caller may not touch them."""
    if not ctx.is_owner:
        return ToolResult.error("only the owner changes the instructions")
    if ctx.stores is None:
        return ToolResult.error("instructions are not available in this conversation")
    return ctx.stores.instructions
