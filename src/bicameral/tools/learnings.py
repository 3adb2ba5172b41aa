"""The learnings tool: when corrected, write down what went wrong in the same turn, for later reflection."""

from __future__ import annotations

from datetime import UTC

from pydantic import BaseModel, Field

from bicameral.redaction import scrub
from bicameral.store.learnings import AUTHOR_PREFIX
from bicameral.tools.base import Tool, ToolContext, ToolResult

# Anyone allowed to talk may record a learning; only the owner's are unlimited, so no one else can flood the file.
PER_PERSON_PER_DAY = 5


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
        learnings = ctx.stores.learnings
        day = ctx.now().astimezone(UTC).strftime("%Y-%m-%d")
        authors = ctx.authority.people or (ctx.chat,)
        if not ctx.is_owner and any(learnings.written_by(p, day) >= PER_PERSON_PER_DAY for p in authors):
            return ToolResult.error(f"not recorded: at most {PER_PERSON_PER_DAY} learnings a day come from one person")
        heading = f"## {day} — {_one_line(args.topic)}" + (" [pending]" if args.proposed_rule else "")
        # Their words are quoted, never structure: no line of theirs can pose as a heading, a marker or an author.
        quoted = [f"> {line}" for line in scrub(args.what_happened.strip()).splitlines()]
        role = ctx.authority.role.name.lower()
        lines = [heading, "", *quoted, f"{AUTHOR_PREFIX}{' '.join(authors)}; {role}; in chat {ctx.chat})"]
        if args.proposed_rule:
            lines += ["", f"**Proposed rule:** {_one_line(scrub(args.proposed_rule))}"]
        learnings.append("\n".join(lines))
        return ToolResult("learning recorded" + (" as [pending] for review" if args.proposed_rule else ""))


def _one_line(text: str) -> str:
    """Free text for a heading or a rule line: one line, and no brackets that could forge a review marker."""
    return " ".join(text.split()).replace("[", "(").replace("]", ")")
