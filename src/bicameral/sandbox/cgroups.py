"""A cgroup per sandboxed command, so one memory bound and one process bound hold its whole tree.

RLIMIT_AS bounds each process on its own: five processes under a 2 GiB limit held 5.5 GiB together. A
cgroup's memory limit counts every process of the command, its page cache and its tmpfs pages too. We use
the kernel's files directly (there is no daemon to ask: bwrap has no cgroup option and systemd may be absent):
cgroup v2 where it offers the memory and pids controllers, else v1's memory and pids hierarchies (what
Debian 12 in a Firecracker VM, this project's CI, has). Where neither can be written (not root, nothing
delegated), `cgroup_parent()` says why and the sandbox keeps its per-process limits.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

CONTROLLERS = ("memory", "pids")
PREFIX = "bicameral-"  # every cgroup we make: `bicameral-<our pid>-<n>`, and v2's leaf for our own process
OWN_LEAF = "bicameral-main"
_counter = itertools.count(1)


@dataclass(frozen=True)
class CommandGroup:
    """One command's cgroup: one directory in v2, one per controller in v1."""

    version: int
    dirs: tuple[Path, ...]
    _join_files: tuple[str, ...] = field(default=(), repr=False)

    def join(self) -> None:
        """Move the calling process into the group; run in the child before it execs bubblewrap, so every
        process of the command starts inside."""
        for path in self._join_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # 0: the writing process
            finally:
                os.close(fd)

    def oom_kills(self) -> int:
        """Processes the kernel killed for going past the group's memory limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for directory in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                for line in (directory / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        return 0

    def pids(self) -> list[int]:
        found: set[int] = set()
        for directory in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(line) for line in (directory / "cgroup.procs").read_text().split())
        return sorted(found)

    def kill(self) -> None:
        """SIGKILL every process in the group (v2's cgroup.kill; in v1 each process, by a pidfd checked to be ours)."""
        kill_file = self.dirs[0] / "cgroup.kill"
        if self.version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
            return
        for _ in range(10):  # a process forked between reading the list and the kill is found the next time
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                _kill_if_still_ours(pid, self)

    def remove(self) -> bool:
        """Delete the group's directories; False while a process is still exiting (then call again)."""
        gone = True
        for directory in self.dirs:
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        return gone


def _kill_if_still_ours(pid: int, group: CommandGroup) -> None:
    # A pid read from cgroup.procs may exit and be reused before the kill: open a pidfd first, then check
    # the pid is still in the group. The pidfd holds that process, so the signal cannot reach another one.
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if pid in group.pids():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)


@dataclass(frozen=True)
class CgroupParent:
    """Where command groups are made: v2's directory with memory and pids on for its children, or v1's two."""

    version: int
    dirs: tuple[Path, ...]

    def describe(self) -> str:
        return f"cgroup v{self.version}"

    def create(self, memory_bytes: int, processes: int) -> CommandGroup:
        """A new group with these bounds; raises OSError (with nothing left behind) when it cannot be made."""
        name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        made: list[Path] = []
        try:
            for parent in self.dirs:
                directory = parent / name
                directory.mkdir()
                made.append(directory)
            if self.version == 2:
                (group_dir,) = made
                _write(group_dir / "memory.max", memory_bytes)
                _write(group_dir / "memory.swap.max", 0, optional=True)  # no swap to spill into
                _write(group_dir / "pids.max", processes)
            else:
                memory_dir, pids_dir = made
                _write(memory_dir / "memory.limit_in_bytes", memory_bytes)
                # memory plus swap: the same bound, so nothing spills into swap (absent without swap accounting).
                _write(memory_dir / "memory.memsw.limit_in_bytes", memory_bytes, optional=True)
                _write(pids_dir / "pids.max", processes)
        except OSError:
            for directory in made:
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise
        return CommandGroup(self.version, tuple(made), tuple(str(d / "cgroup.procs") for d in made))


def _write(path: Path, value: int, *, optional: bool = False) -> None:
    try:
        path.write_text(str(value))
    except FileNotFoundError:
        if not optional:
            raise


_found: CgroupParent | str | None = None
_lock = threading.Lock()


def cgroup_parent() -> CgroupParent | str:
    """This process's place for command groups (found once, then kept), or why there is none."""
    global _found
    with _lock:
        if _found is None:
            _found = find_parent(Path("/proc/self"))
        return _found


def find_parent(proc_self: Path) -> CgroupParent | str:
    """Look for a writable cgroup hierarchy with memory and pids; a sentence when there is none."""
    try:
        memberships = _memberships((proc_self / "cgroup").read_text())
        mounts = _cgroup_mounts((proc_self / "mountinfo").read_text())
    except OSError as exc:
        return f"cannot read this process's cgroups ({exc.strerror})"
    v2 = _v2_dir(memberships, mounts)
    why_not_v2 = None
    if v2 is not None:
        offered = _read_words(v2 / "cgroup.controllers")
        if set(CONTROLLERS) <= offered:
            found = _setup_v2(v2)
            if isinstance(found, CgroupParent):
                return found
            why_not_v2 = found
    v1 = [_v1_dir(controller, memberships, mounts) for controller in CONTROLLERS]
    if all(v1):
        found = _check(CgroupParent(1, tuple(d for d in v1 if d is not None)))
        if isinstance(found, CgroupParent) or why_not_v2 is None:
            return found
    return why_not_v2 or "no cgroup hierarchy here offers the memory and pids controllers"


def _setup_v2(own: Path) -> CgroupParent | str:
    # "No internal processes": a cgroup that hands controllers to its children may hold no process itself (the
    # real root excepted), so when enabling them is refused ours moves into a leaf of its own first. A cgroup
    # shared with other processes is left alone: they are not ours to move.
    wanted = " ".join(f"+{c}" for c in CONTROLLERS)
    control = own / "cgroup.subtree_control"
    if set(CONTROLLERS) <= _read_words(control):
        return _check(CgroupParent(2, (own,)))
    with contextlib.suppress(OSError):
        control.write_text(wanted)
        return _check(CgroupParent(2, (own,)))
    others = {pid for pid in _read_words(own / "cgroup.procs") if pid != str(os.getpid())}
    if others:
        return (
            f"the cgroup {own} holds other processes too: run bicameral in a cgroup of its own "
            "(e.g. a systemd service with Delegate=yes) for a bound on a command's whole tree"
        )
    leaf = own / OWN_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as exc:
        return f"cannot create a cgroup under {own} ({exc.strerror})"
    try:
        control.write_text(wanted)
    except OSError as exc:
        with contextlib.suppress(OSError):
            (own / "cgroup.procs").write_text(str(os.getpid()))
            leaf.rmdir()
        return f"cannot enable memory and pids in {own} ({exc.strerror})"
    return _check(CgroupParent(2, (own,)))


def _check(parent: CgroupParent) -> CgroupParent | str:
    """Make and remove one group: the proof that this process may; stale empty groups of dead processes go too."""
    for directory in parent.dirs:
        _remove_stale(directory)
    try:
        group = parent.create(64 << 20, 16)
    except OSError as exc:
        return f"cannot create a cgroup ({exc.strerror}): not root, and none delegated to this user"
    group.remove()
    return parent


def _remove_stale(directory: Path) -> None:
    with contextlib.suppress(OSError):
        for child in directory.iterdir():
            owner = child.name.removeprefix(PREFIX).split("-")[0]
            if child.name.startswith(PREFIX) and owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    child.rmdir()  # only an empty group goes; one still holding a process stays


def _memberships(text: str) -> dict[str, str]:
    """controller -> this process's path in its hierarchy; "" is v2's unified one."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


@dataclass(frozen=True)
class _Mount:
    root: str
    point: Path
    version: int
    options: frozenset[str]


def _cgroup_mounts(text: str) -> list[_Mount]:
    mounts = []
    for line in text.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, extra = fields.split(), tail.split()
        if len(parts) < 5 or len(extra) < 3 or extra[0] not in ("cgroup", "cgroup2"):
            continue
        point = Path(parts[4].replace("\\040", " "))
        mounts.append(_Mount(parts[3], point, 2 if extra[0] == "cgroup2" else 1, frozenset(extra[2].split(","))))
    return mounts


def _under(mount: _Mount, path: str) -> Path | None:
    """The directory of cgroup `path` through this mount, when the mount shows it."""
    root = mount.root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    directory = mount.point / path[len(root):].lstrip("/")
    return directory if directory.is_dir() else None


def _v2_dir(memberships: dict[str, str], mounts: list[_Mount]) -> Path | None:
    path = memberships.get("")
    for mount in mounts:
        if mount.version == 2 and path is not None and (found := _under(mount, path)) is not None:
            return found
    return None


def _v1_dir(controller: str, memberships: dict[str, str], mounts: list[_Mount]) -> Path | None:
    path = memberships.get(controller)
    for mount in mounts:
        if mount.version == 1 and controller in mount.options and path is not None:
            if (found := _under(mount, path)) is not None:
                return found
    return None


def _read_words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()
