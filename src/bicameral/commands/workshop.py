"""Adding, removing and rolling back the owner's commands: name, policy, sandboxed tests, git commit, a reload after."""

from __future__ import annotations

import ast
import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bicameral.commands.history import HistoryError
from bicameral.commands.loader import describe_file
from bicameral.commands.policy import check_command, check_tests
from bicameral.commands.registry import Commands
from bicameral.commands.trial import TrialResult, run_tests
from bicameral.sandbox.runner import Sandbox

MAX_SOURCE_CHARS = 40_000
# Names a command may never take, besides the built-in commands: what `/commands` itself uses.
ALWAYS_RESERVED = frozenset({"commands", "help", "start"})


class Refused(Exception):
    """Why a change was not made: which rule, which line, or what the tests said."""


@dataclass(frozen=True)
class Done:
    """A change committed: what the owner is told."""

    text: str


class Workshop:
    """Every change to the commands folder goes through here, one at a time, checks first."""

    def __init__(self, commands: Commands, sandbox: Sandbox | str) -> None:
        self.commands = commands
        self.history = commands.history
        self.sandbox = sandbox  # where tests run, or why they cannot run here
        self._lock = asyncio.Lock()  # one change at a time

    def _reserved(self) -> frozenset[str]:
        return ALWAYS_RESERVED | self.commands.reserved()

    async def create(
        self, name: str, description: str, code: str, tests: str, request: str, *, replace: bool,
        granted: frozenset[str] = frozenset(),
    ) -> Done:
        """Check, test in the sandbox, commit, and reload after the reply; `replace` lets an existing command change;
        `granted`: the capabilities the owner gave it (the code may declare no other)."""
        async with self._lock:
            return await self._create(name, description, code, tests, request, replace=replace, granted=granted)

    async def _create(
        self, name: str, description: str, code: str, tests: str, request: str, *, replace: bool, granted: frozenset[str]
    ) -> Done:
        self._check_name(name, new=not replace)
        if asked := sorted(_declared_capabilities(code) - granted):
            raise Refused(f"the code asks for {', '.join(asked)}, which the owner has not granted this command")
        if len(code) > MAX_SOURCE_CHARS or len(tests) > MAX_SOURCE_CHARS:
            raise Refused(f"the code and the tests must each stay under {MAX_SOURCE_CHARS} characters")
        self._check_sources(name, description, code, tests)
        result = await self._trial(name, code, tests)
        if not result.passed:
            raise Refused("its tests did not pass in the sandbox, so nothing was saved:\n" + result.report)
        with tempfile.TemporaryDirectory(prefix="bicameral-command-") as temp:
            candidate = Path(temp) / f"{name}.py"  # read as it will be loaded, before the folder (and a version in use)
            candidate.write_text(code, encoding="utf-8")
            found = await describe_file(
                candidate, self.commands.config.import_timeout_seconds, confinement=self.commands.confinement
            )
        if isinstance(found, str):
            raise Refused(f"it cannot be loaded, so nothing was saved: {found}")
        folder = self.commands.folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.py").write_text(code, encoding="utf-8")
        (folder / f"test_{name}.py").write_text(tests, encoding="utf-8")
        commit = await self._commit(name, request or f"{'change' if replace else 'add'} /{name}: {description}")
        self.commands.reload_after_reply()
        return Done(f"/{name} passed its tests in the sandbox ({_summary(result.report)}) and is committed ({commit}); "
                    "it works once this reply has gone out.")

    async def remove(self, name: str, request: str) -> Done:
        async with self._lock:
            return await self._remove(name, request)

    async def _remove(self, name: str, request: str) -> Done:
        if not (self.commands.folder / f"{name}.py").exists():
            raise Refused(f"there is no command /{name}")
        self._discard(name)
        commit = await self._commit(name, request or f"remove /{name}")
        self.commands.reload_after_reply()
        return Done(f"/{name} is removed (commit {commit}); `/commands history {name}` still shows its versions.")

    async def rollback(self, name: str, ref: str, request: str) -> Done:
        """The command (and its tests) as at `ref` (a commit, or a date: the last version before it), checked and
        tested again, committed as a new change."""
        async with self._lock:
            return await self._rollback(name, ref, request)

    async def _rollback(self, name: str, ref: str, request: str) -> Done:
        try:
            revision = await self.history.revision(name, ref)
            code = await self.history.show(revision, f"{name}.py")
            tests = await self.history.show(revision, f"test_{name}.py")
        except HistoryError as exc:
            raise Refused(str(exc)) from exc
        if code is None or tests is None:
            raise Refused(f"/{name} did not exist at {ref}")
        description = _description(code) or name
        done = await self._create(name, description, code, tests, request or f"roll /{name} back to {revision[:10]}",
                                  replace=True, granted=_declared_capabilities(code))  # granted when it was made
        return Done(f"/{name} is back to its version of {revision[:10]}. " + done.text)

    def _check_name(self, name: str, *, new: bool) -> None:
        if not name.isidentifier() or not name.islower() or name.startswith(("test_", "_")) or len(name) > 32:
            raise Refused(f"{name!r} is not a command name: lowercase letters, digits and _, at most 32, not test_…")
        if name in self._reserved():
            raise Refused(f"/{name} is a built-in command; choose another name")
        if new and (self.commands.folder / f"{name}.py").exists():
            raise Refused(f"/{name} exists already; change it with replace, or remove it first")

    def _check_sources(self, name: str, description: str, code: str, tests: str) -> None:
        refusals = [f"{name}.py {r}" for r in check_command(code, f"{name}.py")]
        refusals += [f"test_{name}.py {r}" for r in check_tests(tests, name, f"test_{name}.py")]
        if refusals:
            raise Refused("the code breaks the command rules:\n" + "\n".join(f"- {r}" for r in refusals))
        declared = _declared_name(code)
        if declared != name:
            raise Refused(f'{name}.py must declare @command(name="{name}", ...) (it declares {declared!r})')

    async def _trial(self, name: str, code: str, tests: str) -> TrialResult:
        if isinstance(self.sandbox, str):
            raise Refused(f"its tests cannot run here, so nothing was saved: {self.sandbox}")
        why = await self.sandbox.unavailable()
        if why is not None:
            raise Refused(f"its tests cannot run here, so nothing was saved: {why}")
        return await run_tests(self.sandbox, self.commands.folder, name, code, tests)

    async def _commit(self, name: str, message: str) -> str:
        try:
            return await self.history.commit([f"{name}.py", f"test_{name}.py"], message)
        except HistoryError as exc:
            raise Refused(f"the files are written but not committed: {exc}") from exc

    def _discard(self, name: str) -> None:
        for path in (self.commands.folder / f"{name}.py", self.commands.folder / f"test_{name}.py"):
            path.unlink(missing_ok=True)


def _decorator_keyword(code: str, keyword: str) -> str | None:
    """The string given as `keyword=` to the first `@command(...)` in the code (read from the AST, never run)."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "command":
            for kw in node.keywords:
                if kw.arg == keyword and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
    return None


def _declared_capabilities(code: str) -> frozenset[str]:
    """The capabilities the `@command(...)` lists (`capabilities=["network"]`), read from the AST."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "command":
            for kw in node.keywords:
                if kw.arg == "capabilities" and isinstance(kw.value, ast.List | ast.Tuple):
                    return frozenset(str(e.value) for e in kw.value.elts if isinstance(e, ast.Constant))
                if kw.arg == "capabilities":
                    return frozenset({"(capabilities not written as a list of strings)"})
    return frozenset()


def _declared_name(code: str) -> str | None:
    return _decorator_keyword(code, "name")


def _description(code: str) -> str | None:
    return _decorator_keyword(code, "description")


def _summary(report: str) -> str:
    """pytest's last counting line (`2 passed in 0.03s`)."""
    lines = [line.strip("= ") for line in report.splitlines() if " passed" in line]
    return lines[-1] if lines else "passed"
