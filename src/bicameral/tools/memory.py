"""Memory tools: remember, recall and forget facts, and say what is kept; within the conversation's reach only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from bicameral.store.memory import MAX_FACT_CHARS, Memory
from bicameral.store.memory_index import Fact
from bicameral.store.memory_scopes import OutOfReach, Reach
from bicameral.tools.base import Tool, ToolContext, ToolResult

_NO_MEMORY = "memory is not available in this conversation"


class RememberArgs(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS, description="The fact, as one self-contained sentence.")
    importance: float = Field(default=0.5, ge=0, le=1, description="0 trivia … 1 must never be forgotten (allergies, names).")
    key: str | None = Field(
        default=None,
        max_length=60,
        description="A short topic such as 'diet' or 'home city': a later fact with the same key replaces this one.",
    )
    replaces: str | None = Field(default=None, max_length=40, description="Id of an older fact this one corrects.")
    where: Literal["me", "group", "global"] | None = Field(
        default=None,
        description="'me': the sender's private facts (default in a DM); 'group': this group's shared facts "
        "(default in a group); 'global': notes for every chat (owner only).",
    )


class RecallArgs(BaseModel):
    query: str = Field(default="", max_length=500, description="Words to look for; empty lists the most important facts.")
    limit: int = Field(default=8, ge=1, le=30)


class ForgetArgs(BaseModel):
    what: str = Field(
        min_length=1, max_length=500, description="A fact id (e.g. m1a2b3c4), or words every fact to delete contains."
    )


class NoArgs(BaseModel):
    pass


class Remember(Tool[RememberArgs]):
    name = "remember"
    description = (
        "Keep a durable fact about the user, this group or the owner's world, for later conversations "
        "(preferences, names, dates, decisions). Repeats are not duplicated; to correct a fact pass its id "
        "in `replaces` or reuse its `key` (the old one is kept in history)."
    )
    args_model = RememberArgs

    async def run(self, args: RememberArgs, ctx: ToolContext) -> ToolResult:
        memory, reach = _memory(ctx)
        if memory is None or reach is None:
            return ToolResult.error(_NO_MEMORY)
        try:
            scope = reach.writable(args.where)
            kept = memory.remember(scope, args.text, importance=args.importance, key=args.key, replaces=args.replaces)
        except (OutOfReach, ValueError) as exc:
            return ToolResult.error(str(exc))
        if kept.outcome == "repeat":
            return ToolResult(f"already remembered as [{kept.fact.id}]: {kept.fact.text}")
        if kept.replaced is not None:
            return ToolResult(
                f"remembered [{kept.fact.id}] ({reach.describe(scope)}), replacing [{kept.replaced.id}] "
                f"{kept.replaced.text!r}, which is kept in history"
            )
        return ToolResult(f"remembered [{kept.fact.id}] ({reach.describe(scope)}): {kept.fact.text}")


class Recall(Tool[RecallArgs]):
    name = "recall"
    description = "Search what you remember (the user's private facts, this group's, global notes), best match first."
    args_model = RecallArgs

    async def run(self, args: RecallArgs, ctx: ToolContext) -> ToolResult:
        memory, reach = _memory(ctx)
        if memory is None or reach is None:
            return ToolResult.error(_NO_MEMORY)
        facts = memory.recall(args.query, reach.readable, args.limit)
        if not facts:
            return ToolResult(f"nothing remembered matches {args.query!r}" if args.query else "nothing remembered yet")
        return ToolResult("\n".join(describe(f, reach) for f in facts))


class Forget(Tool[ForgetArgs]):
    name = "forget"
    description = (
        "Delete remembered facts for good, by id or by words they all contain (from the memory files and the "
        "search index). Use it when the user asks you to forget something."
    )
    args_model = ForgetArgs

    async def run(self, args: ForgetArgs, ctx: ToolContext) -> ToolResult:
        memory, reach = _memory(ctx)
        if memory is None or reach is None:
            return ToolResult.error(_NO_MEMORY)
        gone = memory.forget(args.what, reach.forgettable)
        if not gone:
            return ToolResult(f"nothing I may forget here matches {args.what!r}")
        texts = [f.text for f in gone]
        if ctx.stores is not None:
            ctx.stores.sessions.scrub(ctx.chat, texts)  # as /forget does: the stored conversation forgets it too
        ctx.forgotten.extend(texts)
        return ToolResult(f"forgot {len(gone)}:\n" + "\n".join(describe(f, reach) for f in gone))


class MemoryStats(Tool[NoArgs]):
    name = "memory_stats"
    description = "How many facts each memory reachable here keeps (and, for the owner, memory files that could not be read)."
    args_model = NoArgs

    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolResult:
        memory, reach = _memory(ctx)
        if memory is None or reach is None:
            return ToolResult.error(_NO_MEMORY)
        stats = memory.stats(reach.readable)
        lines = [f"{reach.describe(scope)}: {stats.counts.get(scope, 0)} fact(s)" for scope in reach.readable]
        if ctx.is_owner and stats.broken:
            lines.append("memory files skipped (fix them and they are read again):")
            lines += [f"- {path}: {error}" for path, error in stats.broken]
        return ToolResult("\n".join(lines))


def describe(fact: Fact, reach: Reach) -> str:
    return f"[{fact.id}] ({reach.describe(fact.scope)}, importance {fact.importance:g}) {fact.text}"


def _memory(ctx: ToolContext) -> tuple[Memory | None, Reach | None]:
    return (ctx.stores.memory if ctx.stores is not None else None), ctx.reach
