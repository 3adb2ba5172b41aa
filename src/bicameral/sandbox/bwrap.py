"""Builds the bubblewrap arguments for one command: the workspace read-write, the system read-only, nothing else."""

from __future__ import annotations

from pathlib import Path

# Mounted read-only when present; symlinks (merged /usr) are recreated as symlinks.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/ld.so.cache", "/etc/localtime", "/etc/mime.types")
INSIDE_WORKSPACE = "/workspace"
SANDBOX_UID = 65534  # nobody
SANDBOX_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": INSIDE_WORKSPACE, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
SETPRIV = "/usr/bin/setpriv"
# Started by root, the command must run as a real unprivileged host user: the kernel never holds root (nor a
# user namespace mapped onto root) to the process limit, so a fork bomb would get through. setpriv switches to
# it after bwrap has mounted everything and entered the workspace; bwrap keeps only the capabilities for that, and setpriv
# drops those too (the bounding set included) before the command starts.
DROP_TO_SANDBOX_USER = (
    SETPRIV, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"
)


def bwrap_options(
    workspace: Path, *, as_root: bool, network: bool = False, tmp_bytes: int | None = None,
    read_only: tuple[tuple[Path, str], ...] = (),
) -> list[str]:
    """bwrap's options, without the command. They hold the workspace's host path: the runner hands them to bwrap
    through `--args FD`, so that no argv a command can read (/proc/1/cmdline is bwrap's) shows it. `read_only`: more
    host folders shown read-only under /opt (an owner-made command's tests need Python and pytest)."""
    options = ["--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
    options += ["--unshare-cgroup-try", "--hostname", "sandbox", "--cap-drop", "ALL"]
    if as_root:
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH"):
            options += ["--cap-add", cap]
    else:
        options += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    if network:
        options += ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf", "--ro-bind-try", "/etc/hosts", "/etc/hosts"]
    else:
        options.append("--unshare-net")
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            options += ["--symlink", str(path.readlink()), name]
        elif path.is_dir():
            options += ["--ro-bind", name, name]
    # Made by bwrap as root, /etc and /tmp would be closed to the unprivileged sandbox user without these modes.
    options += ["--perms", "0755", "--dir", "/etc"]
    for name in SYSTEM_FILES:
        options += ["--ro-bind-try", name, name]
    if read_only:
        options += ["--perms", "0755", "--dir", "/opt"]
    for host, inside in read_only:
        options += ["--ro-bind", str(host), inside]
    options += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777"]
    if tmp_bytes is not None:
        # /tmp lives in memory: without a cgroup to charge its pages to, only this size bounds it.
        options += ["--size", str(tmp_bytes)]
    options += ["--tmpfs", "/tmp"]
    options += ["--bind", str(workspace.resolve()), INSIDE_WORKSPACE, "--chdir", INSIDE_WORKSPACE, "--clearenv"]
    for key, value in SANDBOX_ENV.items():
        options += ["--setenv", key, value]
    return options


def command_argv(command: str, *, as_root: bool) -> list[str]:
    """What follows bwrap's options: `command` stays one element handed to `sh -c` inside the sandbox, never a host shell."""
    drop = list(DROP_TO_SANDBOX_USER) if as_root else []
    return ["--", *drop, "/bin/sh", "-c", command]


def bwrap_argv(bwrap: str, workspace: Path, command: str, *, as_root: bool, network: bool = False) -> list[str]:
    """The whole invocation on one argv, as `bwrap --args` reads it back: for reading and for tests."""
    return [bwrap, *bwrap_options(workspace, as_root=as_root, network=network), *command_argv(command, as_root=as_root)]


def options_data(options: list[str]) -> bytes:
    """The options as `bwrap --args FD` reads them: each one ended by a NUL."""
    if any("\0" in option for option in options):
        raise ValueError("a bubblewrap option cannot hold a NUL character")
    return b"".join(option.encode() + b"\0" for option in options)
