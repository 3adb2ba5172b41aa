"""The live command registry: the last load of the folder, reloaded after a change once the reply has gone out."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bicameral.commands import CommandContext, Fetch, FilesFor
from bicameral.commands.calls import BadArguments, call, parse_typed
from bicameral.commands.history import CommandHistory, Git, run_git
from bicameral.commands.loader import CommandSet, load_folder
from bicameral.commands.process import Confinement, Spawn

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommandsConfig:
    """Where the owner's commands live and how long each step may take."""

    folder: Path
    call_timeout_seconds: float = 30.0
    test_timeout_seconds: float = 60.0
    import_timeout_seconds: float = 10.0
    bwrap: str = "bwrap"
    # A change made where no lane turn ends after it (a back task in two-chamber mode) loads after this long anyway.
    reload_grace_seconds: float = 5.0


class Commands:
    """Holds the current `CommandSet`; a reload swaps in a new one, so a call under way keeps the one it started with."""

    def __init__(
        self, config: CommandsConfig, *, reserved: Callable[[], frozenset[str]] = lambda: frozenset(),
        spawn: Spawn | None = None, git: Git = run_git, fetch: Fetch | None = None, files: FilesFor | None = None,
    ) -> None:
        self.config = config
        self.fetch = fetch  # what a command granted `network` may call; None: no network for any
        self.files = files  # a chat's workspace, for a command granted `files`; None: no files for any
        # bubblewrap around every command's child process; None: the child runs unconfined, and `unconfined` says why
        self.confinement: Confinement | None = None
        self.unconfined: str | None = None
        self.history = CommandHistory(config.folder, git)
        self.reserved = reserved  # the built-in commands' names (the console's and the lanes'), known once both exist
        self.current = CommandSet()
        self._spawn = spawn
        self._wanted = False
        self._reloading: asyncio.Task[CommandSet] | None = None
        self._fallback: asyncio.TimerHandle | None = None
        self.reloaded = asyncio.Event()  # set after every reload: tests and the owner's `/commands reload` wait on it

    @property
    def folder(self) -> Path:
        return self.config.folder

    async def reload(self) -> CommandSet:
        """Load the folder again and swap the result in."""
        timeout = self.config.import_timeout_seconds
        loaded = await load_folder(
            self.folder, reserved=self.reserved(), import_timeout=timeout, spawn=self._spawn, confinement=self.confinement
        )
        self.current = loaded
        log.info("commands loaded: %s", ", ".join(sorted(loaded.commands)) or "none")
        self.reloaded.set()
        return loaded

    def reload_after_reply(self) -> None:
        """A change was committed: reload when the turn that made it has ended (its reply sent), not during it."""
        self._wanted = True
        self.reloaded.clear()
        if self._fallback is None:
            self._fallback = asyncio.get_running_loop().call_later(self.config.reload_grace_seconds, self.turn_ended)

    def turn_ended(self) -> None:
        """Called by the lanes after every turn: start a wanted reload in the background."""
        if not self._wanted:
            return
        self._wanted = False
        if self._fallback is not None:
            self._fallback.cancel()
            self._fallback = None
        self._reloading = asyncio.create_task(self._reload_logged(), name="commands-reload")

    async def _reload_logged(self) -> CommandSet:
        try:
            return await self.reload()
        except Exception:
            log.exception("reloading the commands failed; the previous ones stay")
            return self.current

    def answers(self, name: str) -> bool:
        """Whether `/name` is answered here: `/commands`, or a loaded command."""
        return name == "commands" or self.current.get(name) is not None

    def problems(self) -> list[str]:
        """Each command file skipped, with why: /audit lists them."""
        note = [f"commands run outside bubblewrap (no environment, limits only): {self.unconfined}"] if self.unconfined else []
        return [*note, *self.current.problems]

    async def run_typed(self, name: str, text: str, context: CommandContext) -> str:
        """`/name args` typed in a chat: the arguments parsed by the declared types, the usage line on a mistake."""
        spec = self.current.get(name)
        if spec is None:
            return f"There is no command /{name}."
        try:
            arguments = parse_typed(spec, text)
        except BadArguments as exc:
            return f"I can't run that: {exc}"
        answer, _ = await call(
            spec, arguments, context, timeout=self.config.call_timeout_seconds, fetch=self.fetch, confinement=self.confinement,
            files=self.files,
        )
        return answer
