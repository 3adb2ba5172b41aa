"""The learnings tool: when corrected, write down what went wrong in the same turn, for later reflection."""

from __future__ import annotations

from datetime import UTC

from pydantic import BaseModel, Field

from bicameral.redaction import scrub
from bicameral.tools.base import Tool, ToolContext, ToolResult


class LearningArgs(BaseModel):
    topic: str = Field(min_length=1, max_length=80, description="A few words naming what it was about.")
    what_happened: str = Field(min_length=1, max_length=2000, description="What you did, and the correction.")
    proposed_rule: str | None = Field(
        default=None, max_length=500, description="A rule that would have prevented it; marks the entry [pending] for review."
    )


class RecordLearning(Tool[LearningArgs]):
    name = "record_learning"
    description = (
        "When the user corrects you, or you notice you got something wrong, write a learning entry right away, "
        "in the same turn (do not defer). Add a proposed rule when a general rule would prevent it next time."
    )
    args_model = LearningArgs

    async def run(self, args: LearningArgs, ctx: ToolContext) -> ToolResult:
        if ctx.stores is None:
            return ToolResult.error("learnings are not available in this conversation")
        day = ctx.now().astimezone(UTC).strftime("%Y-%m-%d")
        topic = " ".join(args.topic.split())
        heading = f"## {day} — {topic}" + (" [pending]" if args.proposed_rule else "")
        lines = [heading, "", scrub(args.what_happened.strip()), f"(chat {ctx.chat})"]
        if args.proposed_rule:
            lines += ["", f"**Proposed rule:** {scrub(' '.join(args.proposed_rule.split()))}"]
        ctx.stores.learnings.append("\n".join(lines))
        return ToolResult("learning recorded" + (" as [pending] for review" if args.proposed_rule else ""))
