"""The current time, in UTC or a named time zone."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from bicameral.tools.base import Tool, ToolContext, ToolResult


class NowArgs(BaseModel):
    timezone: str = Field(default="UTC", max_length=64, description="IANA zone such as Europe/Berlin.")


class CurrentTime(Tool[NowArgs]):
    name = "current_time"
    description = "The current date and time, in UTC or a given IANA time zone."
    args_model = NowArgs

    async def run(self, args: NowArgs, ctx: ToolContext) -> ToolResult:
        try:
            zone = ZoneInfo(args.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            return ToolResult.error(f"unknown time zone {args.timezone!r}; use an IANA name like Europe/Berlin")
        now = ctx.now().astimezone(zone)
        return ToolResult(now.strftime(f"%Y-%m-%d %H:%M:%S %A ({args.timezone}, UTC%z)"))
