"""Builds the bubblewrap argv for one command: the workspace read-write, the system read-only, nothing else."""

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


def bwrap_argv(bwrap: str, workspace: Path, command: str, *, as_root: bool, network: bool = False) -> list[str]:
    """The full argv; `command` stays one element handed to `sh -c` inside the sandbox, never a host shell."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--hostname", "sandbox", "--cap-drop", "ALL"]
    if as_root:
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH"):
            argv += ["--cap-add", cap]
    else:
        argv += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    if network:
        argv += ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf", "--ro-bind-try", "/etc/hosts", "/etc/hosts"]
    else:
        argv.append("--unshare-net")
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            argv += ["--symlink", str(path.readlink()), name]
        elif path.is_dir():
            argv += ["--ro-bind", name, name]
    # Made by bwrap as root, /etc and /tmp would be closed to the unprivileged sandbox user without these modes.
    argv += ["--perms", "0755", "--dir", "/etc"]
    for name in SYSTEM_FILES:
        argv += ["--ro-bind-try", name, name]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    argv += ["--bind", str(workspace.resolve()), INSIDE_WORKSPACE, "--chdir", INSIDE_WORKSPACE, "--clearenv"]
    for key, value in SANDBOX_ENV.items():
        argv += ["--setenv", key, value]
    drop = list(DROP_TO_SANDBOX_USER) if as_root else []
    return [*argv, "--", *drop, "/bin/sh", "-c", command]
