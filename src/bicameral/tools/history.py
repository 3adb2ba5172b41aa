"""History tools: search past messages by words and dates, or list the latest ones of this chat."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from bicameral.store.memory_index import meaningful_words
from bicameral.tools.base import Tool, ToolContext, ToolResult

_TEXT_CHARS = 400


class HistorySearchArgs(BaseModel):
    words: str = Field(default="", max_length=300, description="Words every message found must contain.")
    since: date | None = Field(default=None, description="First day to include, YYYY-MM-DD (UTC).")
    until: date | None = Field(default=None, description="Last day to include, YYYY-MM-DD (UTC).")
    limit: int = Field(default=20, ge=1, le=50)


class RecentArgs(BaseModel):
    limit: int = Field(default=20, ge=1, le=50)


class HistorySearch(Tool[HistorySearchArgs]):
    name = "history_search"
    # Other people's messages are untrusted content: reading them taints the run.
    untrusted_results = True
    description = (
        "Find past messages by words and a date range ('what did I say about the landlord last month?'). "
        "In a private chat it searches every chat the user is in; in a group, only this group. Newest first."
    )
    args_model = HistorySearchArgs

    async def run(self, args: HistorySearchArgs, ctx: ToolContext) -> ToolResult:
        if ctx.stores is None or ctx.reach is None:
            return ToolResult.error("message history is not available in this conversation")
        if args.since and args.until and args.since > args.until:
            return ToolResult.error(f"since ({args.since}) is after until ({args.until})")
        words = meaningful_words(args.words)
        if not words and not (args.since or args.until):
            return ToolResult.error("give some words to look for, a date range, or both")
        person = ctx.reach.history_person
        channel, _, sender = (person or "").partition(":")
        rows = ctx.stores.messages.search(
            words,
            chat=ctx.chat,
            person=(channel, sender) if person else None,
            since=_start(args.since),
            until=_start(args.until + timedelta(days=1)) if args.until else None,
            limit=args.limit,
        )
        if not rows:
            return ToolResult("no messages match")
        return ToolResult("\n".join(_line(r, show_chat=person is not None) for r in rows))


class RecentMessages(Tool[RecentArgs]):
    name = "recent_messages"
    # Other people's messages are untrusted content: reading them taints the run.
    untrusted_results = True
    description = "The latest messages of this chat (both sides), oldest first."
    args_model = RecentArgs

    async def run(self, args: RecentArgs, ctx: ToolContext) -> ToolResult:
        if ctx.stores is None:
            return ToolResult.error("message history is not available in this conversation")
        rows = ctx.stores.messages.recent(ctx.chat, args.limit)
        if not rows:
            return ToolResult("no messages yet")
        return ToolResult("\n".join(_line(r, show_chat=False) for r in rows))


def _start(day: date | None) -> float | None:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() if day else None


def _line(row: dict[str, Any], *, show_chat: bool) -> str:
    when = datetime.fromtimestamp(row["created_at"], UTC).strftime("%Y-%m-%d %H:%M")
    who = "you" if row["direction"] == "out" else row["sender_name"] or "someone"
    where = f" in {row['chat']}" if show_chat and "chat" in row else ""
    text = row["text"] if len(row["text"]) <= _TEXT_CHARS else row["text"][:_TEXT_CHARS] + "…"
    return f"[{when} UTC{where}] {who}: {text}"
