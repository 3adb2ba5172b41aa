"""File tools stay inside the chat's workspace whatever path they are given."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bicameral.sandbox.workspace import add_to_workspace, workspace_for
from bicameral.tools.base import ToolContext, ToolResult


async def run_directly(registry, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """The tool itself, past the registry's normaliser and validation: each file tool must stand on its own."""
    tool = registry.get(name)
    return await tool.run(tool.args_model.model_construct(**args), ctx)


TRAVERSALS = [
    "../secret.txt",
    "a/../../secret.txt",
    "./../secret.txt",
    "/etc/passwd",
    "//etc/passwd",
    "~/x",
    "..",
    "a\\..\\..\\secret.txt",
    "name\x00.txt",
    "new\nline.txt",
    "bell\x07",
    "",
    "x" * 2000,
]


async def test_write_then_read_round_trips(registry, make_ctx):
    ctx = make_ctx()
    wrote = await registry.execute("write_file", {"path": "notes/todo.txt", "content": "milk\neggs\n"}, ctx)
    assert not wrote.is_error, wrote.content
    read = await registry.execute("read_file", {"path": "notes/todo.txt"}, ctx)
    assert read.content == "milk\neggs\n"
    assert (workspace_for(ctx.data_dir, ctx.chat) / "notes" / "todo.txt").read_text() == "milk\neggs\n"


async def test_edit_list_and_search(registry, make_ctx):
    ctx = make_ctx()
    await registry.execute("write_file", {"path": "a.txt", "content": "hello world\n"}, ctx)
    edited = await registry.execute("edit_file", {"path": "a.txt", "old": "world", "new": "there"}, ctx)
    assert not edited.is_error
    assert (await registry.execute("read_file", {"path": "a.txt"}, ctx)).content == "hello there\n"
    listing = await registry.execute("list_files", {}, ctx)
    assert "a.txt  (12 bytes)" in listing.content
    found = await registry.execute("search_files", {"pattern": "th.re"}, ctx)
    assert found.content == "a.txt:1: hello there"
    ambiguous = await registry.execute("edit_file", {"path": "a.txt", "old": "e", "new": "E"}, ctx)
    assert ambiguous.is_error and "exactly once" in ambiguous.content


@pytest.mark.parametrize("path", TRAVERSALS)
@pytest.mark.parametrize("tool", ["read_file", "write_file", "list_files"])
async def test_hostile_paths_are_refused_and_nothing_is_written_outside(registry, make_ctx, tmp_path, tool, path):
    ctx = make_ctx()
    (ctx.data_dir).mkdir(parents=True, exist_ok=True)
    args = {"path": path, "content": "pwned"} if tool == "write_file" else {"path": path}
    result = await run_directly(registry, tool, args, ctx)
    assert result.is_error
    assert not (tmp_path / "data" / "secret.txt").exists()
    assert not (tmp_path / "data" / "workspaces" / "secret.txt").exists()


async def test_symlinks_pointing_out_are_refused(registry, make_ctx, tmp_path):
    ctx = make_ctx()
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    root = workspace_for(ctx.data_dir, ctx.chat)
    (root / "link").symlink_to(secret)
    (root / "dirlink").symlink_to(tmp_path)
    for args in ({"path": "link"}, {"path": "dirlink/secret.txt"}):
        result = await registry.execute("read_file", args, ctx)
        assert result.is_error and "outside the workspace" in result.content
    overwrite = await registry.execute("write_file", {"path": "link", "content": "x"}, ctx)
    assert overwrite.is_error
    assert secret.read_text() == "host secret"


async def test_device_files_are_refused(registry, make_ctx):
    ctx = make_ctx()
    root = workspace_for(ctx.data_dir, ctx.chat)
    os.mkfifo(root / "pipe")
    result = await registry.execute("read_file", {"path": "pipe"}, ctx)
    assert result.is_error and "not a regular file" in result.content


async def test_another_chats_workspace_is_out_of_reach(registry, make_ctx):
    alice, bob = make_ctx("telegram:1"), make_ctx("telegram:2")
    await registry.execute("write_file", {"path": "diary.txt", "content": "alice only"}, alice)
    for path in ("../telegram_1/diary.txt", "../../workspaces/telegram_1/diary.txt"):
        assert (await registry.execute("read_file", {"path": path}, bob)).is_error
    assert (await registry.execute("read_file", {"path": "diary.txt"}, bob)).is_error


async def test_large_reads_are_cut_with_a_note(registry, make_ctx):
    ctx = make_ctx()
    (workspace_for(ctx.data_dir, ctx.chat) / "big.txt").write_text("x" * 300_000)
    result = await registry.execute("read_file", {"path": "big.txt"}, ctx)
    assert "[cut: showed bytes 0-16000 of 300000; read again with offset=16000]" in result.content


async def test_file_tools_are_the_owners_only(registry, make_ctx):
    guest = make_ctx(owner=False)
    result = await registry.execute("read_file", {"path": "a.txt"}, guest)
    assert result.is_error and "only for the owner" in result.content
    assert "write_file" not in {s.name for s in registry.specs(is_owner=False)}


def test_a_received_file_is_copied_into_the_workspace_under_a_free_name(tmp_path: Path):
    data = tmp_path / "data"
    received = tmp_path / "att" / "report.csv"
    received.parent.mkdir()
    received.write_text("a,b\n")
    first = add_to_workspace(data, "telegram:1", received)
    second = add_to_workspace(data, "telegram:1", received)
    assert first.name == "report.csv" and second.name == "report-1.csv"
    first.write_text("changed")
    assert received.read_text() == "a,b\n"
