"""Runs a command's tests in the bubblewrap sandbox: a temporary copy of the commands folder, Python and pytest read-only."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import bicameral
from bicameral.commands.process import Confinement
from bicameral.sandbox.bwrap import SANDBOX_UID
from bicameral.sandbox.runner import Limits, Sandbox

INSIDE_PYTHON, INSIDE_SITE, INSIDE_SOURCE = "/opt/python", "/opt/site", "/opt/src"


@dataclass(frozen=True)
class TrialResult:
    passed: bool
    report: str  # pytest's output (the end of it), or why the tests could not run


def python_folders() -> tuple[tuple[Path, str], ...] | str:
    """The host folders the tests need inside (the interpreter, the packages holding pytest, bicameral), or why not."""
    found = importlib.util.find_spec("pytest")  # found, not imported: the app never loads pytest
    if found is None or found.origin is None:
        return "pytest is not installed, so a command's tests cannot run: `pip install pytest` in bicameral's environment"
    site = Path(found.origin).parent.parent
    source = Path(bicameral.__file__).parent.parent
    return ((Path(sys.base_prefix), INSIDE_PYTHON), (site, INSIDE_SITE), (source, INSIDE_SOURCE))


def trial_sandbox(bwrap: str, *, wall_seconds: float) -> Sandbox | str:
    """A sandbox for test runs: no network, the usual limits, the time limit given; or why there is none."""
    folders = python_folders()
    if isinstance(folders, str):
        return folders
    limits = Limits(wall_seconds=wall_seconds, cpu_seconds=max(1, int(wall_seconds)), output_bytes=8000)
    return Sandbox(limits, bwrap=bwrap, read_only=folders)


async def confinement(bwrap: str) -> Confinement | str:
    """bubblewrap for every command's child process, where it works here; else why not."""
    folders = python_folders()
    if isinstance(folders, str):
        return folders
    sandbox = Sandbox(bwrap=bwrap)
    if why := await sandbox.unavailable():
        return why
    return Confinement(shutil.which(bwrap) or bwrap, folders)


def pytest_command(test_file: str) -> str:
    """The shell line run inside: only the sandbox's /opt copies on the path, no plugins but pytest-asyncio's."""
    python = f"{INSIDE_PYTHON}/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    env = (
        f"PYTHONPATH={INSIDE_SITE}:{INSIDE_SOURCE}:/workspace PYTHONDONTWRITEBYTECODE=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"
    )
    asyncio_plugin = "-p pytest_asyncio.plugin -o asyncio_mode=auto -o asyncio_default_fixture_loop_scope=function"
    if importlib.util.find_spec("pytest_asyncio") is None:
        asyncio_plugin = ""
    return f"{env} {python} -m pytest -q -p no:cacheprovider {asyncio_plugin} --rootdir=/workspace {test_file}"


async def run_tests(sandbox: Sandbox, folder: Path, name: str, code: str, tests: str) -> TrialResult:
    """Copy the folder's commands to a temporary workspace, write the new files over it, run `test_<name>.py`; passed
    only when pytest exits 0 (so at least one test was collected, and every one passed)."""
    with tempfile.TemporaryDirectory(prefix="bicameral-command-") as temp:
        workspace = Path(temp)
        _fill(workspace, folder, name, code, tests)
        result = await sandbox.run(workspace, pytest_command(f"test_{name}.py"))
    report = result.report(sandbox.limits)
    if result.exit_code == 5:
        return TrialResult(False, "no tests were collected: the test file needs at least one `def test_...`\n" + report)
    return TrialResult(not result.failed, report)


def _fill(workspace: Path, folder: Path, name: str, code: str, tests: str) -> None:
    """The folder's modules (the command may use none of them, but its tests see the folder as it will be), the new
    files over them, the workspace handed to the sandbox user."""
    if folder.is_dir():
        for path in folder.glob("*.py"):
            shutil.copyfile(path, workspace / path.name)
    (workspace / f"{name}.py").write_text(code, encoding="utf-8")
    (workspace / f"test_{name}.py").write_text(tests, encoding="utf-8")
    if os.geteuid() == 0:  # the sandbox user must be able to write pytest's files here, as in a chat workspace
        os.chown(workspace, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
