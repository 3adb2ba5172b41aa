"""The owner's read-only SQL tool over the assistant's own tables (messages, tasks, tool calls, memory)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from bicameral.store.query import MAX_ROWS, MAX_SQL_CHARS, QueryRefused, run_readonly
from bicameral.threads import in_tool_thread
from bicameral.tools.base import Tool, ToolContext, ToolResult


class QueryArgs(BaseModel):
    sql: str = Field(
        min_length=1, max_length=MAX_SQL_CHARS,
        description="One SELECT in SQLite's dialect (CTEs allowed); on PostgreSQL it is translated.",
    )


class DatabaseQuery(Tool[QueryArgs]):
    name = "database_query"
    description = (
        "Owner only: run one read-only SQLite SELECT over the assistant's own database for questions across "
        "chats and sessions. Tables: messages, tasks, task_events, tool_calls, memory_facts, sessions, sqlite_master. "
        f"At most {MAX_ROWS} rows; long text is cut."
    )
    args_model = QueryArgs
    owner_only = True  # never even listed to anyone else

    async def run(self, args: QueryArgs, ctx: ToolContext) -> ToolResult:
        if not ctx.is_owner:
            return ToolResult.error("database_query is for the owner only")
        if ctx.stores is None:
            return ToolResult.error("the database is not available in this conversation")
        try:
            # A slow query must not hold up the other chats: run it beside the event loop, in the tools' threads.
            result = await in_tool_thread(ctx.chat, run_readonly, ctx.stores.db, args.sql)
        except QueryRefused as exc:
            return ToolResult.error(f"refused: {exc}")
        if not result.rows:
            return ToolResult(" | ".join(result.columns) + "\n(no rows)")
        lines = [" | ".join(result.columns)]
        lines += [" | ".join("NULL" if v is None else str(v) for v in row) for row in result.rows]
        if result.more:
            lines.append(f"(only the first {len(result.rows)} rows; narrow the query or add LIMIT/OFFSET)")
        return ToolResult("\n".join(lines))
