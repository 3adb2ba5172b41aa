"""`run`'s bounds on a whole command: memory and processes together (a cgroup), the workspace's size, the disk's
reserve, and no host path in what a command can read. Through the real bubblewrap."""

from __future__ import annotations

import asyncio
import os
import textwrap

import pytest

from bicameral.sandbox.cgroups import CgroupParent, cgroup_parent, find_parent
from bicameral.sandbox.disk import DiskLimits, MiB
from bicameral.sandbox.runner import Limits, Sandbox
from bicameral.sandbox.workspace import workspace_for
from bicameral.tools.registry import ToolRegistry
from bicameral.tools.shell import RunCommand
from tests.support.small_disk import fill, small_disk

WHY_OFF = asyncio.run(Sandbox().unavailable())
needs_bwrap = pytest.mark.skipif(WHY_OFF is not None, reason=f"no working bubblewrap here: {WHY_OFF}")
CGROUPS = cgroup_parent()

# Five children each take 300 MB and hold it until all five have it; the parent says whether they did.
FIVE_HOGS = textwrap.dedent(
    """\
    cat > hogs.py <<'EOF'
    import os, select
    ready_r, ready_w = os.pipe()
    kids = []
    for _ in range(5):
        pid = os.fork()
        if pid == 0:
            hold = bytearray(300 << 20)  # zero-filled, so every page is really taken
            os.write(ready_w, b"+")
            select.select([], [], [])  # hold it until killed
        kids.append(pid)
    ready = 0
    while ready < 5:
        if select.select([ready_r], [], [], 0.05)[0]:
            ready += len(os.read(ready_r, 5))
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            print("a child died:", os.waitstatus_to_exitcode(status))
            break
    else:
        print("all five hold 300 MB")
    for pid in kids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    EOF
    python3 hogs.py
    """
)


def _registry(limits: Limits, disk: DiskLimits | None = None, **kwargs) -> ToolRegistry:
    return ToolRegistry([RunCommand(Sandbox(limits, disk=disk, **kwargs))], timeout=90)


@needs_bwrap
async def test_five_processes_share_one_memory_bound(make_ctx):
    if not isinstance(CGROUPS, CgroupParent):
        pytest.skip(f"no cgroup can bound a command's whole tree here, only each process: {CGROUPS}")
    shell = _registry(Limits(memory_bytes=512 * MiB, wall_seconds=60))
    result = await shell.execute("run", {"command": FIVE_HOGS}, make_ctx())
    assert "all five hold" not in result.content
    assert result.is_error and "[out of memory:" in result.content and "together they went past 512 MiB" in result.content
    # The command's cgroup went with it.
    assert not [p for d in CGROUPS.dirs for p in d.glob(f"bicameral-{os.getpid()}-*")]


@needs_bwrap
async def test_without_cgroups_the_limits_are_per_process_and_doctor_says_so(make_ctx):
    sandbox = Sandbox(Limits(memory_bytes=512 * MiB), cgroups=lambda: "off for this test")
    assert "per process only" in sandbox.bounds() and "off for this test" in sandbox.bounds()
    result = await ToolRegistry([RunCommand(sandbox)]).execute("run", {"command": "echo fine"}, make_ctx())
    assert result.content == "fine\n[exit code 0]"
    if isinstance(CGROUPS, CgroupParent):
        assert "whole tree" in Sandbox().bounds()


@needs_bwrap
async def test_a_run_writing_past_the_workspace_quota_is_stopped_and_the_workspace_stays_usable(make_ctx):
    shell = _registry(Limits(file_bytes=1 << 30, wall_seconds=60), DiskLimits(quota_bytes=16 * MiB, reserve_bytes=MiB))
    ctx = make_ctx()
    writer = "for i in $(seq 1 2000); do head -c 1000000 /dev/zero > f$i || exit 3; done; echo wrote all"
    try:
        result = await shell.execute("run", {"command": writer}, ctx)
        assert result.is_error and "wrote all" not in result.content
        assert "[stopped: the workspace went past its quota of 16 MiB" in result.content
        assert "delete files in it to make room" in result.content
        after = await shell.execute("run", {"command": "rm -f f*; echo kept > small; cat small"}, ctx)
        assert after.content == "kept\n[exit code 0]"
    finally:
        for stale in workspace_for(ctx.data_dir, ctx.chat).glob("f*"):
            stale.unlink()


@needs_bwrap
async def test_no_run_starts_when_the_disk_is_under_the_reserve(make_ctx, tmp_path):
    with small_disk(tmp_path / "data", 32):
        ctx = make_ctx()
        workspace = workspace_for(ctx.data_dir, ctx.chat)
        shell = _registry(Limits(), DiskLimits(reserve_bytes=8 * MiB))
        fill(ctx.data_dir, leave=4 * MiB)
        result = await shell.execute("run", {"command": "echo should not run > out"}, ctx)
        assert result.is_error
        assert result.content.startswith("[not run: the disk that holds the data is nearly full (")
        assert "8 MiB are kept for the database" in result.content
        assert not (workspace / "out").exists()


@needs_bwrap
async def test_a_run_eating_into_the_reserve_is_stopped_before_the_disk_is_full(make_ctx, tmp_path):
    with small_disk(tmp_path / "data", 128):
        ctx = make_ctx()
        shell = _registry(Limits(file_bytes=1 << 30, wall_seconds=60), DiskLimits(reserve_bytes=48 * MiB))
        # At most 50 MB/s, so the watcher's polls see it pass the reserve long before the 128 MiB are gone.
        writer = (
            "python3 -c 'import time\n"
            "with open(\"big\", \"wb\") as f:\n"
            "    for _ in range(120):\n"
            "        f.write(bytes(1 << 20)); f.flush(); time.sleep(0.02)\n"
            "print(\"wrote 120 MiB\")'"
        )
        result = await shell.execute("run", {"command": writer}, ctx)
        assert "[stopped: the disk that holds the data is nearly full" in result.content
        assert "No space left" not in result.content and "wrote 120 MiB" not in result.content
        st = os.statvfs(ctx.data_dir)
        assert st.f_bavail * st.f_frsize > 0


@needs_bwrap
async def test_no_host_path_in_any_command_line_a_command_can_read(make_ctx):
    ctx = make_ctx()
    host = str(ctx.data_dir)  # tmp_path: already the real path
    shell = _registry(Limits())
    result = await shell.execute(
        "run", {"command": "for f in /proc/[0-9]*/cmdline /proc/self/cmdline; do tr '\\0' ' ' < $f; echo; done"}, ctx
    )
    assert not result.is_error
    assert "/bin/sh -c for f in" in result.content  # it did read the command lines
    assert host not in result.content
    assert "--args" in result.content  # bwrap's own: its options came through a file descriptor
    environ = await shell.execute("run", {"command": "cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'"}, ctx)
    assert host not in environ.content


def test_cgroups_are_found_from_this_process_s_own_files(tmp_path):
    # A v1 layout like this project's machines: memory and pids hierarchies, the process in a nested memory cgroup.
    memory, pids = tmp_path / "memory", tmp_path / "pids"
    (memory / "svc" / "inner").mkdir(parents=True)
    pids.mkdir()
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("8:pids:/\n4:memory:/svc/inner\n1:name=systemd:/\n0::/\n")
    (proc / "mountinfo").write_text(
        f"30 20 0:25 / {memory} rw - cgroup cgroup rw,memory\n"
        f"31 20 0:26 / {pids} rw - cgroup cgroup rw,pids\n"
        f"32 20 0:27 / {tmp_path / 'unified'} rw - cgroup2 cgroup2 rw\n"
    )
    found = find_parent(proc)
    assert isinstance(found, CgroupParent) and found.version == 1
    assert found.dirs == (memory / "svc" / "inner", pids)
    group = found.create(64 * MiB, 16)
    assert (group.dirs[0] / "memory.limit_in_bytes").read_text() == str(64 * MiB)
    assert (group.dirs[1] / "pids.max").read_text() == "16"
    # A plain directory stands in for cgroupfs, whose control files the kernel removes with the directory.
    for directory in group.dirs:
        for item in directory.iterdir():
            item.unlink()
    assert group.remove() and not group.dirs[0].exists()
    (proc / "mountinfo").write_text("")
    assert "no cgroup hierarchy here offers the memory and pids controllers" in str(find_parent(proc))


def test_a_v2_cgroup_shared_with_other_processes_is_left_alone(tmp_path):
    unified = tmp_path / "unified"
    (unified / "user.slice" / "session").mkdir(parents=True)
    own = unified / "user.slice" / "session"
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    # A directory in place of the control file: writing to it fails, as the kernel refuses (EBUSY) to enable
    # controllers for the children of a cgroup that holds processes.
    (own / "cgroup.subtree_control").mkdir()
    (own / "cgroup.procs").write_text(f"{os.getpid()}\n1234567\n")
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("0::/user.slice/session\n")
    (proc / "mountinfo").write_text(f"32 20 0:27 / {unified} rw - cgroup2 cgroup2 rw\n")
    why = find_parent(proc)
    assert isinstance(why, str) and "holds other processes too" in why and "Delegate=yes" in why
    assert not (own / "bicameral-main").exists()
