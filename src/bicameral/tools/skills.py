"""skill_list and skill_read: the skills (step-by-step playbooks) the owner keeps and the package ships."""

from __future__ import annotations

from pydantic import BaseModel, Field

from bicameral.sandbox.paths import PathRefused, resolve_inside
from bicameral.store.skills import SKILL_FILE, SkillError
from bicameral.tools.base import Tool, ToolContext, ToolResult

_UNAVAILABLE = "skills are not available in this conversation"


class ListArgs(BaseModel):
    pass


class ReadArgs(BaseModel):
    name: str = Field(min_length=1, max_length=100, description="The skill's name, as skill_list gives it.")
    path: str = Field(
        default=SKILL_FILE, min_length=1, max_length=255,
        description="A file inside the skill's folder; default its instructions, SKILL.md.",
    )


class SkillList(Tool[ListArgs]):
    name = "skill_list"
    description = (
        "The skills you can follow: step-by-step playbooks for recurring jobs, each named with what it does and "
        "when to use it. When a request fits one, read it with skill_read and follow it."
    )
    args_model = ListArgs

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        if ctx.stores is None:
            return ToolResult.error(_UNAVAILABLE)
        skills = ctx.stores.skills.all()
        if not skills:
            return ToolResult("No skills.")
        return ToolResult("\n".join(f"- {s.name}: {s.description}" for s in skills))


class SkillRead(Tool[ReadArgs]):
    name = "skill_read"
    description = (
        "Read a skill's instructions (its SKILL.md) by its name from skill_list, then follow them; "
        "with `path`, a file beside them that the instructions mention."
    )
    args_model = ReadArgs

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        if ctx.stores is None:
            return ToolResult.error(_UNAVAILABLE)
        skills, name, path = ctx.stores.skills, args.name.strip(), args.path.strip()
        try:
            resolve_inside(skills.require(name).folder, path)  # the one path checker; `read` checks again
            return ToolResult(skills.read(name, path))
        except (SkillError, PathRefused) as exc:
            return ToolResult.error(str(exc))
