"""File tools under attack: a folder swapped for a symlink mid-call, runaway patterns, absurd offsets and broken text."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bicameral.sandbox import artifacts, paths, workspace
from bicameral.sandbox.workspace import add_to_workspace, workspace_for
from bicameral.tools import files
from tests.hands.test_files import run_directly

HOST_SECRET = "root:x:0:0:HOST SECRET"


class Race:
    """`sub/` is a real folder whenever the path checker looks at it and a symlink to a host folder right after."""

    def __init__(self, root: Path, host: Path, stash: Path) -> None:
        self.root, self.host, self.stash = root, host, stash
        (root / "sub").mkdir()
        (root / "sub" / "passwd").write_text("decoy HOST\n")

    def real(self) -> None:
        sub = self.root / "sub"
        if sub.is_symlink():
            sub.unlink()
            os.rename(self.stash, sub)

    def link(self) -> None:
        sub = self.root / "sub"
        if not sub.is_symlink():
            os.rename(sub, self.stash)
            os.symlink(self.host, sub)

    def checker(self, check: Callable[[Path, str], Path]) -> Callable[[Path, str], Path]:
        def racing(root: Path, given: str) -> Path:
            self.real()
            try:
                return check(root, given)
            finally:
                self.link()

        return racing


@pytest.fixture
def race(make_ctx, tmp_path, monkeypatch) -> Race:
    host = tmp_path / "host"
    host.mkdir()
    (host / "passwd").write_text(HOST_SECRET + "\n")
    ctx = make_ctx()
    race = Race(workspace_for(ctx.data_dir, ctx.chat), host, tmp_path / "stash")
    monkeypatch.setattr(files, "resolve_inside", race.checker(paths.resolve_inside))
    monkeypatch.setattr(artifacts, "resolve_inside", race.checker(paths.resolve_inside))
    return race


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "sub/passwd"}),
        ("write_file", {"path": "sub/passwd", "content": "pwned"}),
        ("edit_file", {"path": "sub/passwd", "old": "HOST", "new": "pwned"}),
        ("list_files", {"path": "sub"}),
        ("search_files", {"pattern": "SECRET|HOST", "path": "sub"}),
        ("send_file", {"path": "sub/passwd"}),
    ],
)
async def test_a_folder_swapped_for_a_symlink_after_the_check_is_never_followed(
    registry, make_ctx, outbox, race, tmp_path, tool, args
):
    ctx = make_ctx()
    result = await registry.execute(tool, args, ctx)
    assert result.is_error and "symbolic link" in result.content, result.content
    assert "SECRET" not in result.content and "passwd" not in result.content.replace(args["path"], "")
    assert (race.host / "passwd").read_text() == HOST_SECRET + "\n"
    assert sorted(p.name for p in race.host.iterdir()) == ["passwd"]
    assert outbox.actions == []
    snapshots = [p for p in (ctx.data_dir / "outgoing").rglob("*") if p.is_file()] if (ctx.data_dir / "outgoing").exists() else []
    assert snapshots == []


async def test_a_symlink_inside_the_workspace_to_a_file_inside_still_reads(registry, make_ctx):
    ctx = make_ctx()
    root = workspace_for(ctx.data_dir, ctx.chat)
    (root / "real.txt").write_text("inside")
    (root / "alias.txt").symlink_to("real.txt")
    assert (await registry.execute("read_file", {"path": "alias.txt"}, ctx)).content == "inside"


def test_a_link_planted_after_the_name_was_checked_is_not_written_through(tmp_path, monkeypatch):
    data = tmp_path / "data"
    received = tmp_path / "att" / "report.csv"
    received.parent.mkdir()
    received.write_text("a,b\n")
    planted = tmp_path / "host" / "cron-job"
    planted.parent.mkdir()
    check = paths.resolve_inside

    def racing(root: Path, given: str) -> Path:
        checked = check(root, given)
        if not (root / "report.csv").is_symlink():
            os.symlink(planted, root / "report.csv")  # dangling: the copy would create the host file through it
        return checked

    monkeypatch.setattr(workspace, "resolve_inside", racing)
    copy = add_to_workspace(data, "telegram:1", received)
    assert not planted.exists()
    assert copy.name == "report-1.csv" and not copy.is_symlink() and copy.read_text() == "a,b\n"


async def test_a_runaway_pattern_is_stopped_with_a_clear_answer_while_the_loop_keeps_serving(registry, make_ctx, monkeypatch):
    monkeypatch.setattr(files, "SEARCH_FILE_SECONDS", 0.5, raising=False)
    ctx = make_ctx()
    root = workspace_for(ctx.data_dir, ctx.chat)
    (root / "crafted.txt").write_text("a" * 24 + "b\n")  # (a|a)+$ backtracks 2**24 ways here
    (root / "other.txt").write_text("still here")
    search = asyncio.create_task(registry.execute("search_files", {"pattern": "(a|a)+$"}, ctx))
    await asyncio.sleep(0)  # the search starts
    other = await registry.execute("read_file", {"path": "other.txt"}, ctx)
    assert other.content == "still here"
    assert not search.done(), "another chat's call was served while the pattern ran"
    result = await search
    assert result.is_error and "took too long" in result.content and "simplify" in result.content, result.content


@pytest.mark.parametrize("pattern", ["(a{1000}){1000}", "(?:x|(?=b{300})c{300}){300}", "((a{30}){30}){30}"])
async def test_a_pattern_that_would_unroll_into_millions_of_steps_is_refused_before_it_is_compiled(
    registry, make_ctx, monkeypatch, pattern
):
    compiled: list[str] = []
    import regex  # type: ignore[import-untyped]

    monkeypatch.setattr(regex, "compile", lambda p, *a, **k: compiled.append(p))
    ctx = make_ctx()
    (workspace_for(ctx.data_dir, ctx.chat) / "a.txt").write_text("a" * 100)
    result = await registry.execute("search_files", {"pattern": pattern}, ctx)
    assert result.is_error and "smaller counts" in result.content, result.content
    assert compiled == [], "regex unrolls counted repeats when it compiles: (a{60000}){60000} took all the memory there was"


async def test_counted_repeats_of_ordinary_size_still_search(registry, make_ctx):
    ctx = make_ctx()
    (workspace_for(ctx.data_dir, ctx.chat) / "ids.txt").write_text("id 123e4567-e89b-12d3-a456-426614174000\n")
    uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    result = await registry.execute("search_files", {"pattern": uuid}, ctx)
    assert result.content == "ids.txt:1: id 123e4567-e89b-12d3-a456-426614174000"


async def test_an_invalid_pattern_is_named(registry, make_ctx):
    result = await registry.execute("search_files", {"pattern": "(unclosed"}, make_ctx())
    assert result.is_error and "not a valid regular expression" in result.content


async def test_read_offsets_past_the_end_or_absurd_get_clear_answers(registry, make_ctx):
    ctx = make_ctx()
    (workspace_for(ctx.data_dir, ctx.chat) / "a.txt").write_text("hello")
    huge = await registry.execute("read_file", {"path": "a.txt", "offset": 10**30}, ctx)
    assert huge.is_error and "offset" in huge.content and "unexpectedly" not in huge.content, huge.content
    past = await registry.execute("read_file", {"path": "a.txt", "offset": 10**12}, ctx)
    assert past.is_error and "past the end of the file (size 5 bytes)" in past.content, past.content
    negative = await registry.execute("read_file", {"path": "a.txt", "offset": -1}, ctx)
    assert negative.is_error and "offset" in negative.content
    at_end = await registry.execute("read_file", {"path": "a.txt", "offset": 5}, ctx)
    assert not at_end.is_error and "end of the file" in at_end.content
    assert (await registry.execute("read_file", {"path": "a.txt", "offset": 3}, ctx)).content == "lo"


SURROGATE = "\ud800"
SURROGATE_CALLS = [
    ("read_file", {"path": f"{SURROGATE}.txt"}),
    ("write_file", {"path": f"{SURROGATE}.txt", "content": "x"}),
    ("write_file", {"path": "a.txt", "content": f"x{SURROGATE}"}),
    ("edit_file", {"path": f"{SURROGATE}.txt", "old": "hello", "new": "x"}),
    ("edit_file", {"path": "a.txt", "old": "hello", "new": SURROGATE}),
    ("edit_file", {"path": "a.txt", "old": SURROGATE, "new": "x"}),
    ("list_files", {"path": SURROGATE}),
    ("search_files", {"pattern": "x", "path": SURROGATE}),
    ("search_files", {"pattern": SURROGATE}),
    ("send_file", {"path": f"{SURROGATE}.txt"}),
    ("send_file", {"path": "a.txt", "caption": SURROGATE}),
]


@pytest.mark.parametrize(("tool", "args"), SURROGATE_CALLS)
async def test_lone_surrogates_are_refused_clearly(registry, make_ctx, outbox, tool, args):
    ctx = make_ctx()
    (workspace_for(ctx.data_dir, ctx.chat) / "a.txt").write_text("hello")
    result = await run_directly(registry, tool, args, ctx)
    assert result.is_error and "surrogate" in result.content, result.content
    result.content.encode("utf-8")
    assert outbox.actions == []
    assert (workspace_for(ctx.data_dir, ctx.chat) / "a.txt").read_text() == "hello"


ABSURD_PATHS = ["x" * 300, "sub/" + "y" * 256 + "/z", "loop", "loop/x", "a.txt/b", "a.txt/b/c"]


@pytest.mark.parametrize("path", ABSURD_PATHS)
@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "list_files", "search_files", "send_file"])
async def test_absurd_paths_get_a_clear_refusal(registry, make_ctx, outbox, tool, path):
    ctx = make_ctx()
    root = workspace_for(ctx.data_dir, ctx.chat)
    (root / "a.txt").write_text("hello")
    (root / "loop").symlink_to("loop")
    args = {
        "write_file": {"path": path, "content": "x"},
        "edit_file": {"path": path, "old": "hello", "new": "x"},
        "search_files": {"pattern": "x", "path": path},
    }.get(tool, {"path": path})
    result = await registry.execute(tool, args, ctx)
    assert result.is_error and "unexpectedly" not in result.content, result.content
    assert (root / "a.txt").read_text() == "hello"
    assert outbox.actions == []


async def test_names_that_are_not_utf8_are_shown_as_valid_text(registry, make_ctx):
    ctx = make_ctx()
    root = workspace_for(ctx.data_dir, ctx.chat)
    (root / os.fsdecode(b"bad\xff.txt")).write_bytes(b"needle\n")  # a name a command wrote that is not UTF-8
    for tool, args in (("list_files", {}), ("search_files", {"pattern": "needle"})):
        result = await registry.execute(tool, args, ctx)
        assert not result.is_error and "bad\ufffd.txt" in result.content, result.content
        result.content.encode("utf-8")


async def test_edit_arguments_are_bounded(registry, make_ctx):
    ctx = make_ctx()
    (workspace_for(ctx.data_dir, ctx.chat) / "a.txt").write_text("hello")
    big = "x" * (files.MAX_WRITE_BYTES + 1)
    for args in ({"path": "a.txt", "old": big, "new": "y"}, {"path": "a.txt", "old": "hello", "new": big}):
        result = await registry.execute("edit_file", args, ctx)
        assert result.is_error and "at most" in result.content, result.content[:300]


async def test_a_file_that_is_not_utf8_is_not_rewritten_by_an_edit(registry, make_ctx):
    ctx = make_ctx()
    path = workspace_for(ctx.data_dir, ctx.chat) / "blob.bin"
    path.write_bytes(b"hello \xff\xfe world")
    result = await registry.execute("edit_file", {"path": "blob.bin", "old": "hello", "new": "bye"}, ctx)
    assert result.is_error and "UTF-8" in result.content
    assert path.read_bytes() == b"hello \xff\xfe world"


async def test_writing_keeps_the_mode_of_the_file_it_replaces(registry, make_ctx):
    ctx = make_ctx()
    script = workspace_for(ctx.data_dir, ctx.chat) / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o751)
    assert not (await registry.execute("edit_file", {"path": "run.sh", "old": "hi", "new": "there"}, ctx)).is_error
    assert script.read_text() == "echo there\n" and script.stat().st_mode & 0o777 == 0o751
    assert not (await registry.execute("write_file", {"path": "run.sh", "content": "echo again\n"}, ctx)).is_error
    assert script.stat().st_mode & 0o777 == 0o751
    assert sorted(p.name for p in script.parent.iterdir()) == ["run.sh"], "no temporary file is left behind"
