"""The commands folder's own git repository: every change committed (author: the assistant), its log, old versions."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

AUTHOR_NAME, AUTHOR_EMAIL = "bicameral", "bicameral@localhost"
MAX_MESSAGE_CHARS = 2000
_HASH = re.compile(r"^[0-9a-f]{4,40}$")

# Runs git with these arguments in the folder: (exit code, output with errors).
Git = Callable[[Path, list[str]], Awaitable[tuple[int, str]]]


class HistoryError(RuntimeError):
    """git refused or failed; the message says what git said."""


async def run_git(folder: Path, args: list[str]) -> tuple[int, str]:
    """git with the assistant as author and committer, and no system or personal git configuration read."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": AUTHOR_NAME, "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
        "GIT_COMMITTER_NAME": AUTHOR_NAME, "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
    }
    proc = await asyncio.create_subprocess_exec(
        "git", "-C", str(folder), *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env=env,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")


class CommandHistory:
    """git in `<data dir>/commands`, made a repository on first use."""

    def __init__(self, folder: Path, git: Git = run_git) -> None:
        self.folder = folder
        self._git = git
        self._lock = asyncio.Lock()  # one change at a time: git's index is one per repository

    async def _run(self, *args: str) -> str:
        code, out = await self._git(self.folder, list(args))
        if code != 0:
            raise HistoryError(f"git {args[0]} failed: {out.strip()[-500:]}")
        return out

    async def _ensure(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / ".git").exists():
            await self._run("init", "-q", "-b", "main")

    async def commit(self, files: list[str], message: str) -> str:
        """Stage these files (added, changed or removed) and commit them; returns the new commit's short hash."""
        async with self._lock:
            await self._ensure()
            await self._run("add", "-A", "--", *files)
            await self._run("commit", "-q", "--allow-empty", "-m", message[:MAX_MESSAGE_CHARS] or "change commands")
            return (await self._run("rev-parse", "--short", "HEAD")).strip()

    async def log(self, name: str, limit: int = 20) -> str:
        """`/commands history NAME`: the commits that touched the command's files, newest first."""
        if not (self.folder / ".git").exists():
            return ""
        return await self._run(
            "log", f"-{limit}", "--format=%h %ad %s", "--date=format:%Y-%m-%d %H:%M", "--",
            f"{name}.py", f"test_{name}.py",
        )

    async def revision(self, name: str, ref: str) -> str:
        """The commit that `ref` names for the command: a hash, or the last one before a date (`2026-11-25`,
        `yesterday`, `2 days ago`, as git reads dates)."""
        if not (self.folder / ".git").exists():
            raise HistoryError("no command has been committed yet")
        if _HASH.match(ref):
            return (await self._run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")).strip()
        out = (await self._run("log", "-1", "--diff-filter=AM", "--format=%H", f"--before={ref}", "--", f"{name}.py")).strip()
        if not out:
            raise HistoryError(f"no version of {name} from before {ref!r}")
        return out

    async def show(self, ref: str, path: str) -> str | None:
        """The file as it was at `ref`, or None if it did not exist then."""
        code, out = await self._git(self.folder, ["show", f"{ref}:{path}"])
        return out if code == 0 else None
