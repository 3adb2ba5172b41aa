"""`run` in bubblewrap: the workspace and nothing else, no network, limits that hold, the tree killed on cancel."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from bicameral.sandbox.bwrap import bwrap_argv
from bicameral.sandbox.runner import Limits, Sandbox
from bicameral.sandbox.workspace import hand_to_sandbox_user, workspace_for
from bicameral.tools.registry import ToolRegistry
from bicameral.tools.shell import RunCommand
from tests.support.chat import eventually, quiet_for


def _why_no_sandbox() -> str | None:
    return asyncio.run(Sandbox().unavailable())


WHY_OFF = _why_no_sandbox()
needs_bwrap = pytest.mark.skipif(WHY_OFF is not None, reason=f"no working bubblewrap here: {WHY_OFF}")

LIMITS = Limits(cpu_seconds=5, memory_bytes=512 << 20, processes=64, file_bytes=1 << 20, wall_seconds=20, output_bytes=4000)


@pytest.fixture
def shell() -> ToolRegistry:
    return ToolRegistry([RunCommand(Sandbox(LIMITS))], timeout=60)


def test_the_command_is_one_argv_element_for_sh_inside_the_sandbox(tmp_path):
    hostile = "echo hi; rm -rf / $(reboot) `id` && curl evil"
    argv = bwrap_argv("bwrap", tmp_path, hostile, as_root=os.geteuid() == 0)
    assert argv[-3:] == ["/bin/sh", "-c", hostile]
    assert argv.count(hostile) == 1
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in argv


@needs_bwrap
async def test_a_command_runs_in_the_workspace_and_its_files_stay(shell, make_ctx):
    ctx = make_ctx()
    result = await shell.execute("run", {"command": "python3 -c 'print(6*7)' > answer.txt; cat answer.txt; id -u"}, ctx)
    assert result.content == "42\n65534\n[exit code 0]"
    assert (workspace_for(ctx.data_dir, ctx.chat) / "answer.txt").read_text() == "42\n"
    # Only the chat's own directory went to the sandbox user; what holds it keeps its owner.
    assert (ctx.data_dir / "workspaces").stat().st_uid == ctx.data_dir.stat().st_uid == os.getuid()


@needs_bwrap
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat /etc/passwd", "No such file"),
        ("ls /work /root /home", "No such file"),
        ("ls ../", "[exit code 0]"),  # the sandbox root: tmp, usr, workspace... and nothing of the host
        ("touch /usr/evil", "Read-only file system"),
        ("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 3)'", "Network is unreachable"),
        ("env", "HOME=/workspace"),
        ("echo scratch > /tmp/x && cat /tmp/x && awk 'BEGIN{print 6*7}'", "scratch\n42\n[exit code 0]"),
        ("grep CapEff /proc/self/status", "0000000000000000"),
    ],
)
async def test_the_host_and_the_network_are_out_of_reach(shell, make_ctx, tmp_path, command, expected):
    ctx = make_ctx()
    result = await shell.execute("run", {"command": command}, ctx)
    assert expected in result.content
    assert str(tmp_path) not in result.content


@needs_bwrap
async def test_other_chats_workspaces_and_host_processes_are_invisible(shell, make_ctx):
    alice, bob = make_ctx("telegram:1"), make_ctx("telegram:2")
    await shell.execute("run", {"command": "echo alice-secret > diary.txt"}, alice)
    peek_command = "cat ../telegram_1/diary.txt /workspace/../*/diary.txt; ps -e -o pid=,comm="
    peek = await shell.execute("run", {"command": peek_command}, bob)
    assert "alice-secret" not in peek.content
    assert "python" not in peek.content  # our own process is not in its pid namespace
    signal_host = await shell.execute("run", {"command": f"kill -TERM {os.getpid()}"}, bob)
    assert signal_host.is_error  # no such process in its namespace; we are still here


@needs_bwrap
async def test_a_fork_bomb_is_contained_and_other_chats_keep_working(shell, registry, make_ctx):
    bomb = asyncio.create_task(shell.execute("run", {"command": "b(){ b|b & }; b; sleep 2; echo done"}, make_ctx("telegram:1")))
    other = await registry.execute("write_file", {"path": "a.txt", "content": "still here"}, make_ctx("telegram:2"))
    assert not other.is_error
    result = await asyncio.wait_for(bomb, timeout=60)
    assert "Cannot fork" in result.content
    after = await shell.execute("run", {"command": "cat a.txt"}, make_ctx("telegram:2"))
    assert after.content == "still here\n[exit code 0]"


@needs_bwrap
async def test_huge_output_is_cut_with_a_note(shell, make_ctx):
    result = await shell.execute("run", {"command": "yes line | head -n 1000000"}, make_ctx())
    assert "[output cut:" in result.content
    assert len(result.content) < 5000


@needs_bwrap
async def test_limits_on_file_size_memory_and_time(make_ctx):
    tight = ToolRegistry([RunCommand(Sandbox(Limits(file_bytes=1 << 20, memory_bytes=256 << 20, wall_seconds=3)))])
    ctx = make_ctx()
    big = await tight.execute("run", {"command": "head -c 5000000 /dev/zero > big"}, ctx)
    assert big.is_error
    assert (workspace_for(ctx.data_dir, ctx.chat) / "big").stat().st_size <= 1 << 20
    hog = await tight.execute("run", {"command": "python3 -c 'x = bytearray(1 << 30)'"}, ctx)
    assert hog.is_error and "MemoryError" in hog.content
    slow = await tight.execute("run", {"command": "sleep 30"}, ctx)
    assert slow.is_error and "[killed: still running after 3s]" in slow.content


@needs_bwrap
async def test_one_command_per_chat_and_cancel_kills_the_whole_tree(shell, make_ctx):
    ctx = make_ctx()
    marker = workspace_for(ctx.data_dir, ctx.chat) / "alive"
    looping = "(while true; do date > alive; sleep 0.2; done) & sleep 60"
    first = asyncio.create_task(shell.execute("run", {"command": looping}, ctx))
    await eventually(marker.exists, "the loop's first write", timeout=10)
    second = await shell.execute("run", {"command": "true"}, ctx)
    assert second.is_error and "still running" in second.content
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    marker.unlink()
    await quiet_for(1.0, "the loop wrote every 0.2 s: a survivor would have recreated the file by now")
    assert not marker.exists()
    assert not (await shell.execute("run", {"command": "true"}, ctx)).is_error


async def test_without_bubblewrap_run_says_why_and_the_rest_works(registry, make_ctx, tmp_path):
    off = ToolRegistry([RunCommand(Sandbox(bwrap=str(tmp_path / "missing-bwrap")))])
    result = await off.execute("run", {"command": "true"}, make_ctx())
    assert result.is_error and "the sandbox is off" in result.content
    assert not (await registry.execute("current_time", {}, make_ctx())).is_error


def test_only_a_workspace_directory_is_ever_handed_to_the_sandbox_user(tmp_path):
    root = tmp_path / "data" / "workspaces"
    root.mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    (root / "telegram_9").symlink_to(shared)
    owner = shared.stat().st_uid
    for path in (shared, tmp_path, root, root / "telegram_9", root / "a" / ".."):
        with pytest.raises(ValueError, match="not a workspace"):
            hand_to_sandbox_user(root, path)
    assert shared.stat().st_uid == owner and tmp_path.stat().st_uid == owner


def test_bwrap_is_installed_where_the_suite_runs():
    assert shutil.which("bwrap"), "scripts/setup installs bubblewrap; run it"
