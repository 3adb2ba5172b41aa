"""Tool discovery: a module dropped in `tools/` is live; toggles hide tools; typos fail loudly."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from bicameral.events import Action, ActionResult, Authority, Role
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.registry import ToolRegistry, discover_tools

FIRST_TOOLS = {"send_message", "reply_to_message", "edit_message", "delete_message", "react", "current_time"}


def test_the_first_tools_are_discovered():
    names = {tool.name for tool in discover_tools()}
    assert FIRST_TOOLS <= names


def test_every_tool_has_a_description_and_an_object_schema():
    for spec in ToolRegistry(discover_tools()).specs():
        assert spec.description.strip(), spec.name
        assert spec.input_schema.get("type") == "object", spec.name


def test_disabled_tools_are_hidden():
    registry = ToolRegistry(discover_tools(), disabled=["react"])
    assert "react" not in registry.names()
    assert "react" not in {s.name for s in registry.specs()}


def test_disabling_an_unknown_tool_is_an_error_listing_the_real_ones():
    with pytest.raises(ValueError, match="send_message"):
        ToolRegistry(discover_tools(), disabled=["sned_message"])


def test_the_back_chamber_view_excludes_messaging_tools():
    back = ToolRegistry(discover_tools()).subset(exclude_messaging=True)
    assert "send_message" not in back.names()
    assert "current_time" in back.names()


class _Args(BaseModel):
    path: str = "notes.txt"


class _ReadsFiles(Tool):
    name = "peek_file"
    description = "Show a file."
    args_model = _Args
    reads_files = True

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        self.calls.append(ctx.chat)
        return ToolResult("the file's contents")


class _RunsPrograms(_ReadsFiles):
    name = "run_program"
    reads_files = False
    runs_programs = True


class _SharedOnPurpose(_ReadsFiles):
    name = "peek_shared_file"
    owner_only = False


def _ctx(*, is_owner: bool) -> ToolContext:
    async def perform(action: Action) -> ActionResult:
        return ActionResult(ok=True)

    authority = Authority(Role.OWNER if is_owner else Role.MEMBER)
    return ToolContext(chat="telegram:7", turn_id="t1", data_dir=Path("data"), perform=perform, authority=authority)


def test_tools_that_read_files_or_run_programs_are_owner_only_unless_they_say_otherwise():
    assert _ReadsFiles().owner_only and _RunsPrograms().owner_only
    assert not _SharedOnPurpose().owner_only
    everyone = [tool for tool in discover_tools() if tool.name in FIRST_TOOLS]
    assert not any(tool.owner_only for tool in everyone)  # messaging and the clock are for everyone
    assert all(tool.owner_only for tool in discover_tools() if tool.reads_files or tool.runs_programs)


def test_an_owner_only_tool_is_offered_only_to_the_owner():
    registry = ToolRegistry([*discover_tools(), _ReadsFiles(), _SharedOnPurpose()])
    for_owner = {spec.name for spec in registry.specs(is_owner=True)}
    for_others = {spec.name for spec in registry.specs(is_owner=False)}
    assert {"peek_file", "peek_shared_file", "send_message"} <= for_owner
    assert "peek_file" not in for_others and {"peek_shared_file", "send_message"} <= for_others


async def test_an_owner_only_tool_called_by_someone_else_is_refused_and_does_not_run():
    tool = _ReadsFiles()
    registry = ToolRegistry([tool])
    refused = await registry.execute("peek_file", {"path": "secrets.txt"}, _ctx(is_owner=False))
    assert refused.is_error and "only for the owner" in refused.content
    assert tool.calls == []
    allowed = await registry.execute("peek_file", {"path": "notes.txt"}, _ctx(is_owner=True))
    assert not allowed.is_error and allowed.content == "the file's contents"
    assert tool.calls == ["telegram:7"]
