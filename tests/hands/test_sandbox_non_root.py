"""Started by a user other than root, `run` still sandboxes: its own user namespace, the same limits, no capabilities."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import bicameral
from bicameral.sandbox.bwrap import SANDBOX_UID

SRC = Path(bicameral.__file__).parent.parent
COMMAND = (
    "id -u; echo kept > note.txt; head -c 2000000 /dev/zero > big; wc -c < big; "
    "grep -E '^(Max processes|Max file size)' /proc/self/limits; grep CapEff /proc/self/status; "
    "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 3)' 2>&1 | tail -1"
)
# Runs the sandbox in a process of its own and prints the result; under root the test starts it as `nobody`.
CHILD = """
import asyncio, json, os, sys
from pathlib import Path
from bicameral.sandbox.runner import Limits, Sandbox
sandbox = Sandbox(Limits(processes=64, file_bytes=1 << 20, wall_seconds=30))
why = asyncio.run(sandbox.unavailable())
result = None if why else asyncio.run(sandbox.run(Path(sys.argv[1]), sys.argv[2]))
print(json.dumps({"euid": os.geteuid(), "why": why, "exit": result and result.exit_code, "output": result and result.output}))
"""


@pytest.fixture
def home() -> Iterator[Path]:
    """A temp dir of our own; under root it is handed to `nobody`, who runs the child."""
    path = Path(tempfile.mkdtemp(prefix="bicameral-nonroot-"))
    (path / "workspace").mkdir()
    # The code, where `nobody` can read it: the checkout may sit in a directory only its owner may enter.
    shutil.copytree(SRC / "bicameral", path / "src" / "bicameral", ignore=shutil.ignore_patterns("__pycache__"))
    if os.geteuid() == 0:
        for item in (path, path / "workspace"):
            os.chown(item, SANDBOX_UID, SANDBOX_UID)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _as_nobody(argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", *argv]


def _python_for_nobody(home: Path) -> str | None:
    """A Python `nobody` can start (the project's may live under a private home), or None."""
    for python in (sys.executable, shutil.which("python3") or "", "/usr/bin/python3"):
        if python and subprocess.run(_as_nobody([python, "-c", "import sys"]), capture_output=True, cwd=home).returncode == 0:
            return python
    return None


def _run_child(home: Path, python: str) -> dict[str, object]:
    argv = [python, "-c", CHILD, str(home / "workspace"), COMMAND]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(home / "src"), "HOME": str(home)}
    done = subprocess.run(_as_nobody(argv) if os.geteuid() == 0 else argv, capture_output=True, text=True, env=env,
                          cwd=home, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_non_root_process_runs_commands_sandboxed_with_the_same_limits(home):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed here")
    python: str | None = sys.executable
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is needed to start the child as nobody")
        python = _python_for_nobody(home)
        if python is None:
            pytest.skip("no Python here that an unprivileged user may start")
    got = _run_child(home, python)
    assert got["euid"] != 0
    if got["why"]:
        # Where unprivileged user namespaces are off, run is off too, and says why, rather than running unconfined.
        assert "user namespaces" in str(got["why"]) or "could not start" in str(got["why"])
        return
    output = str(got["output"])
    lines = output.splitlines()
    assert lines[0] == str(SANDBOX_UID)  # mapped to nobody inside its own user namespace
    assert lines[1:3] == ["File size limit exceeded", str(1 << 20)]  # the 2 MB write was cut at 1 MiB
    assert any(line.startswith("Max processes") and " 64 " in line for line in lines)
    assert any(line.startswith("Max file size") and str(1 << 20) in line for line in lines)
    assert "CapEff:\t0000000000000000" in output
    assert "Network is unreachable" in output
    assert (home / "workspace" / "note.txt").read_text() == "kept\n"
    # The kernel holds a non-root user to the process limit; the sandbox ran as that user outside too.
    assert (home / "workspace" / "note.txt").stat().st_uid == (SANDBOX_UID if os.geteuid() == 0 else os.geteuid())


def test_run_is_the_same_tool_either_way():
    """No root-only path in the tool: the sandbox picks its flags from the user it runs as."""
    from bicameral.sandbox.bwrap import bwrap_argv

    as_user = bwrap_argv("bwrap", Path("/w"), "true", as_root=False)
    as_root = bwrap_argv("bwrap", Path("/w"), "true", as_root=True)
    assert "--unshare-user" in as_user and "setpriv" not in " ".join(as_user)
    assert "--unshare-user" not in as_root and any(part.endswith("setpriv") for part in as_root)
    for argv in (as_user, as_root):
        assert "--unshare-net" in argv and argv[argv.index("--cap-drop") + 1] == "ALL"
