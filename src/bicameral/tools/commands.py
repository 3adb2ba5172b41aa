"""create_command, remove_command, rollback_command, list_commands (owner only), and each owner-made command as a tool."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bicameral.commands import CommandContext, CommandSpec, Fetch, FilesFor
from bicameral.commands.calls import BadArguments, call, check_arguments, schema
from bicameral.commands.process import Confinement
from bicameral.commands.registry import Commands
from bicameral.commands.workshop import Refused, Workshop
from bicameral.tools.base import Tool, ToolContext, ToolResult

_UNAVAILABLE = "commands are not available here"
TOOL_PREFIX = "cmd_"


class CreateArgs(BaseModel):
    name: str = Field(min_length=1, max_length=32, description="The command's name: lowercase, digits and _ (`/name`).")
    description: str = Field(min_length=1, max_length=300, description="One line: what the command does.")
    code: str = Field(
        min_length=1, max_length=40_000,
        description=(
            "The module `<name>.py`: `from bicameral.commands import command`, then one "
            '`@command(name="<name>", description="...", params=[("text", str, "what it is", True)])` over '
            "`async def <name>(text: str) -> str`. Types: str, int, float, bool. A keyword `context` gives who asked "
            "(sender_id, sender_name, chat, channel, is_owner). Only pure standard-library imports (re, json, math, "
            "datetime, random, statistics, textwrap, string, itertools, functools, collections, dataclasses, typing, "
            "decimal, fractions, zoneinfo, calendar, unicodedata, enum, bisect, heapq, difflib); no files, network, "
            "processes, eval/exec/open/getattr, nothing named with __; module level holds only imports, definitions "
            "and assignments."
        ),
    )
    tests: str = Field(
        min_length=1, max_length=40_000,
        description=(
            "The file `test_<name>.py`: pytest tests that import the command (`from <name> import <name>`) and check "
            "what it returns; `async def test_...` works. The same import rules, plus pytest and asyncio."
        ),
    )
    request: str = Field(default="", max_length=2000, description="The owner's request in their words (the commit message).")
    replace: bool = Field(default=False, description="True to change an existing command.")
    capabilities: list[Literal["network", "files"]] = Field(
        default_factory=list,
        description=(
            "Only what the owner explicitly granted. `network`: the handler may `await context.fetch(url)` (a public "
            "page's text, under web_fetch's rules). `files`: it may `await context.files.read(path)`, "
            "`.write(path, text)` and `.list(path)` in the asking chat's workspace (under the file tools' rules). "
            'The code then declares them: `capabilities=["network"]`. A refusal raises ValueError.'
        ),
    )


class NameArgs(BaseModel):
    name: str = Field(min_length=1, max_length=32, description="The command's name, without the slash.")
    request: str = Field(default="", max_length=2000, description="The owner's request in their words (the commit message).")


class RollbackArgs(NameArgs):
    to: str = Field(
        min_length=1, max_length=100,
        description="A commit hash from `/commands history NAME`, or a date or time: the last version before it "
        "(`yesterday`, `2026-11-25 18:00`, `3 days ago`).",
    )


class ListArgs(BaseModel):
    pass


class CommandArgs(BaseModel):
    """Whatever the model sent: a command's arguments are checked against its declared params (`check_arguments`)."""

    model_config = ConfigDict(extra="allow")


class _WorkshopTool(Tool[Any]):
    """Changes the owner's commands: each subclass declares `owner_only` itself (`Tool` resets an inherited one)."""

    def __init__(self, workshop: Workshop | None = None) -> None:
        self.workshop = workshop


class CreateCommand(_WorkshopTool):
    owner_only = True
    acts_outside = True  # changes what the assistant runs: after untrusted content, only with the owner's approval
    name = "create_command"
    description = (
        "Add (or with replace, change) a slash command the owner asked for: its code and its pytest tests are checked "
        "against the command rules, the tests run in the sandbox, both are committed to the commands folder's git, "
        "and the command works (as /name and as a tool) once your reply has gone out. A refusal says which rule and "
        "which line: fix it and try again."
    )
    args_model = CreateArgs

    async def run(self, args: CreateArgs, ctx: ToolContext) -> ToolResult:
        if self.workshop is None:
            return ToolResult.error(_UNAVAILABLE)
        try:
            done = await self.workshop.create(
                args.name.strip(), args.description, args.code, args.tests, args.request, replace=args.replace,
                granted=frozenset(args.capabilities),
            )
        except Refused as exc:
            return ToolResult.error(f"/{args.name} was not saved: {exc}")
        return ToolResult(done.text)


class RemoveCommand(_WorkshopTool):
    owner_only = True
    acts_outside = True  # changes what the assistant runs: after untrusted content, only with the owner's approval
    name = "remove_command"
    description = "Remove one of the owner's commands (git keeps its history; rollback_command brings it back)."
    args_model = NameArgs

    async def run(self, args: NameArgs, ctx: ToolContext) -> ToolResult:
        if self.workshop is None:
            return ToolResult.error(_UNAVAILABLE)
        try:
            return ToolResult((await self.workshop.remove(args.name.strip(), args.request)).text)
        except Refused as exc:
            return ToolResult.error(str(exc))


class RollbackCommand(_WorkshopTool):
    owner_only = True
    acts_outside = True  # changes what the assistant runs: after untrusted content, only with the owner's approval
    name = "rollback_command"
    description = (
        "Bring one of the owner's commands back to an earlier version from its git history (a commit, or the last "
        "version before a date), tested again and committed."
    )
    args_model = RollbackArgs

    async def run(self, args: RollbackArgs, ctx: ToolContext) -> ToolResult:
        if self.workshop is None:
            return ToolResult.error(_UNAVAILABLE)
        try:
            return ToolResult((await self.workshop.rollback(args.name.strip(), args.to.strip(), args.request)).text)
        except Refused as exc:
            return ToolResult.error(str(exc))


class ListCommands(_WorkshopTool):
    owner_only = True
    acts_outside = False
    name = "list_commands"
    description = "The owner's commands (name and description), and any command file skipped with why."
    args_model = ListArgs

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        if self.workshop is None:
            return ToolResult.error(_UNAVAILABLE)
        return ToolResult(listing(self.workshop.commands) or "No commands yet.")


def listing(commands: Commands) -> str:
    """Each command with its description; the skipped files after."""
    current = commands.current
    lines = [f"/{spec.name} — {spec.description}" + "".join(f" [{c}]" for c in spec.capabilities)
             for spec in sorted(current.commands.values(), key=lambda s: s.name)]
    if current.problems:
        lines += ["Skipped:", *(f"- {p}" for p in current.problems)]
    return "\n".join(lines)


class CommandTool(Tool[Any]):
    """One owner-made command offered to the models; everyone allowed to talk may have it called."""

    args_model = CommandArgs

    def __init__(
        self, spec: CommandSpec, timeout: float, fetch: Fetch | None = None, confinement: Confinement | None = None,
        files: FilesFor | None = None,
    ) -> None:
        self.spec = spec
        self.timeout = timeout
        self.fetch = fetch
        self.files = files
        self.confinement = confinement
        self.name = TOOL_PREFIX + spec.name  # type: ignore[misc]
        self.description = f"The owner's command /{spec.name}: {spec.description}"  # type: ignore[misc]

    def json_schema(self) -> dict[str, Any]:
        return schema(self.spec)

    async def run(self, args: CommandArgs, ctx: ToolContext) -> ToolResult:
        try:
            arguments = check_arguments(self.spec, dict(args.model_extra or {}))
        except BadArguments as exc:
            return ToolResult.error(str(exc))
        people = ctx.authority.people
        context = CommandContext(
            sender_id=people[0].split(":", 1)[-1] if people else "", sender_name="", chat=ctx.chat,
            channel=ctx.chat.split(":", 1)[0], is_owner=ctx.is_owner,
        )
        text, ok = await call(
            self.spec, arguments, context, timeout=self.timeout, fetch=self.fetch, confinement=self.confinement,
            files=self.files,
        )
        return ToolResult(text, is_error=not ok)


def command_tools(commands: Commands) -> list[Tool[Any]]:
    """The current commands as tools (`cmd_<name>`), built from the registry each time tools are offered."""
    timeout = commands.config.call_timeout_seconds
    return [
        CommandTool(spec, timeout, commands.fetch, commands.confinement, commands.files)
        for spec in commands.current.commands.values()
    ]


def workshop_tools(workshop: Workshop) -> list[Tool[Any]]:
    return [CreateCommand(workshop), RemoveCommand(workshop), RollbackCommand(workshop), ListCommands(workshop)]
