"""The turn driver: one `claude` process per worker, one turn at a time, with prompts injected and restarts resumed."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bicameral.agent.breakers import Breakers
from bicameral.claude_code.config import WorkerConfig
from bicameral.claude_code.exchange import Prompt, TurnLedger, TurnOutcome
from bicameral.claude_code.failures import Failure, Recovery, WorkerGaveUp, exit_failure, launch_failure
from bicameral.claude_code.process import CliProcess, Exited, Spawn, spawn_process
from bicameral.claude_code.spec import McpEndpoint, SpawnSpec, assert_safe, build_spec
from bicameral.claude_code.stream import ControlRequest, Init, Result, StreamEvent, UserReplay, preview
from bicameral.claude_code.supervision import CrashBudget, SessionIds, Supervisor
from bicameral.claude_code.turn_events import INTERRUPT_GRACE, TurnEvents
from bicameral.claude_code.workspace import mcp_config_path, private_dir
from bicameral.failures import failure_sentence
from bicameral.mcp.server import McpToolServer, ToolBinding
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry
from bicameral.types import Clock, Sleep

log = logging.getLogger(__name__)
cc = logging.getLogger("bicameral.cc")

_TICK = 0.2  # how often a running turn looks for injected messages


class WorkerState(enum.Enum):
    """Where the worker is in its life; the process's own life is `CliProcess.alive`."""

    IDLE = "idle"  # between turns
    RUNNING = "running"  # a turn's prompts are with the CLI
    SETTLING = "settling"  # a cancelled turn is being wound down in the background
    STOPPED = "stopped"  # `stop()` was called: nothing starts again


class ClaudeCodeWorker(TurnEvents):
    """A long-lived `claude --print --input-format stream-json` process that runs one turn at a time."""

    # One turn at a time is what makes "the current turn" well defined: tool calls arrive through the
    # MCP server under this worker's bearer token and run with the ToolContext of the turn in progress
    # (none between turns, so a late call is refused instead of landing in the wrong chat).

    def __init__(
        self,
        name: str,
        config: WorkerConfig,
        *,
        sessions: SessionIds,
        mcp: McpToolServer,
        tools: ToolRegistry,
        budget: CrashBudget,
        on_giveup: Callable[[Failure], Awaitable[None]] | None = None,
        spawn: Spawn = spawn_process,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.name = name
        self._cfg = config
        self._sessions = sessions
        self._mcp = mcp
        self._tools = tools
        self._spawn = spawn
        self._clock = clock
        self._supervisor = Supervisor(
            name,
            budget,
            backoff_base=config.backoff_base,
            backoff_cap=config.backoff_cap,
            liveness_timeout=config.liveness_timeout,
            liveness_poll=config.liveness_poll,
            on_giveup=on_giveup,
            clock=clock,
            sleep=sleep,
        )
        self._state = WorkerState.IDLE
        self._process: CliProcess | None = None
        self._queue: asyncio.Queue[StreamEvent | Exited] = asyncio.Queue()
        self._getter: asyncio.Task[StreamEvent | Exited] | None = None
        self._busy = asyncio.Lock()
        self._spawning = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._endpoint: McpEndpoint | None = None
        self._ctx: ToolContext | None = None
        self._last_turn_end = clock()
        self._last_exit: Exited | None = None
        self.session_id: str | None = sessions.get()
        self._instance = uuid.uuid4().hex[:8]
        # The most recent spawns, newest last: what was really run (tests and `doctor` look here).
        self.spawns: deque[SpawnSpec] = deque(maxlen=20)

    # --- state ---

    @property
    def alive(self) -> bool:
        # Until its exit is reported (and counted as a crash) a process holds its place: no successor
        # may start before the supervisor has had its say.
        return self._process is not None and self._process.exited is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.alive else None

    @property
    def busy(self) -> bool:
        return self._busy.locked()

    @property
    def gave_up(self) -> bool:
        return self._supervisor.gave_up

    def idle_seconds(self) -> float:
        return 0.0 if self.busy else self._clock() - self._last_turn_end

    # --- lifecycle ---

    async def start(self) -> None:
        """Bind to the MCP server and spawn the process (resuming the stored session, if any)."""
        await self._ensure_running()

    async def stop(self) -> None:
        """End the process cleanly (stdin closed, then terminate, then kill); the session id is kept."""
        self._state = WorkerState.STOPPED
        self._supervisor.stop()
        if self._process is not None:
            await self._process.terminate("worker stopped")
            self._process.cancel()
        if self._getter is not None:
            self._getter.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._endpoint is not None:
            self._mcp.unbind(self._endpoint.token)
            self._endpoint = None
        with contextlib.suppress(OSError):
            self._mcp_config_path().unlink()  # its token is dead now; no reason to leave it on disk

    async def reset_session(self) -> None:
        """Forget the session and restart the process fresh (no --resume, a new session id)."""
        self._sessions.clear()
        self.session_id = None
        if self._process is not None:
            await self._process.terminate("fresh session requested")
        if self._state is not WorkerState.STOPPED and not self.gave_up:
            await self._ensure_running()

    async def interrupt(self) -> None:
        """Ask the CLI to stop the running turn (the `/stop` command)."""
        await self._control({"subtype": "interrupt"})

    # --- a turn ---

    async def run_turn(
        self,
        prompt: Prompt,
        ctx: ToolContext | None = None,
        *,
        drain: Callable[[], list[Prompt]] | None = None,
        on_event: Callable[[StreamEvent], Awaitable[None]] | None = None,
        may_restart: Callable[[], bool] | None = None,
    ) -> TurnOutcome:
        """Send `prompt` (tools run with `ctx`), inject `drain()`'s messages, return when the CLI's turn ends."""
        # A process that dies or stalls mid-turn is respawned with --resume and the turn sent again,
        # unless `may_restart()` says the work already reached the user.
        await self._busy.acquire()
        handed_off = False
        outcome = TurnOutcome()
        try:
            try:
                await self._ensure_running()
            except WorkerGaveUp as exc:
                outcome.failure = exc.failure
                return outcome
            self._flush_stale_events()
            self._ctx = ctx
            self._state = WorkerState.RUNNING
            self._supervisor.touch()
            breakers = Breakers(self._cfg.tool_error_max, self._cfg.tool_error_window, clock=self._clock)
            ledger = TurnLedger(pid=self._current_pid(), breakers=breakers)
            ledger.sent(await self._write(prompt), prompt)
            while True:
                if drain is not None and ledger.interrupted_at is None:
                    for extra in drain():
                        ledger.sent(await self._write(extra), extra)
                        outcome.injected += 1
                event = await self._next(_TICK)
                lost = self._last_exit
                if event is None and lost is not None and lost.pid == ledger.pid and lost.pid not in ledger.handled_exits:
                    event = lost  # the exit happened before this turn could see its event
                if event is None:
                    if await self._waited_too_long(ledger):
                        break
                    continue
                if on_event is not None and not isinstance(event, Exited):
                    try:
                        await on_event(event)
                    except Exception:  # an observer's bug must not desynchronise the turn
                        log.exception("%s: an event observer failed", self.name)
                if await self._apply(event, ledger, outcome, may_restart):
                    break
            return outcome
        except BaseException:
            # `/stop` (a cancellation) or a bug: if the CLI is still working on this turn, a background
            # task stops it and holds the worker until it has, so the next turn starts clean.
            if self._state is WorkerState.RUNNING:
                handed_off = True
                self._ctx = None
                self._state = WorkerState.SETTLING
                self._track(asyncio.create_task(self._settle_cancelled(), name=f"settle:{self.name}"))
            raise
        finally:
            if not handed_off:
                self._end_turn()


    # --- internals: the turn ---

    def _end_turn(self) -> None:
        self._ctx = None
        if self._state is not WorkerState.STOPPED:
            self._state = WorkerState.IDLE
        self._last_turn_end = self._clock()
        if self._busy.locked():
            self._busy.release()

    async def _settle_cancelled(self) -> None:
        try:
            if self.alive:
                await self.interrupt()
                deadline = self._clock() + INTERRUPT_GRACE
                while self._clock() < deadline:
                    event = await self._next(_TICK)
                    if isinstance(event, (Result, Exited)):
                        return
                self._kill("the turn did not stop after /stop", expected=True)
        except Exception:
            log.exception("%s: settling a stopped turn failed", self.name)
        finally:
            self._end_turn()

    def _current_pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _stderr_tail(self) -> list[str]:
        return list(self._process.stderr_tail) if self._process is not None else []

    async def _write(self, prompt: Prompt) -> str:
        message_uuid = str(uuid.uuid4())
        cc.info("[CC.user] %s | %s", self.name, preview(prompt.text))
        if self._process is not None:
            await self._process.send(prompt.stream_message(message_uuid))
        return message_uuid

    async def _control(self, request: dict[str, Any]) -> None:
        if self._process is not None:
            request_id = f"req_{uuid.uuid4().hex[:12]}"
            await self._process.send({"type": "control_request", "request_id": request_id, "request": request})

    def _kill(self, reason: str, *, expected: bool) -> None:
        if self._process is not None:
            self._process.kill(reason, expected=expected)

    # --- internals: the process ---

    async def _ensure_running(self) -> None:
        """Return once a process is up; waits out a scheduled respawn, raises WorkerGaveUp after giving up."""
        while True:
            if self._supervisor.failure is not None:
                raise WorkerGaveUp(self._supervisor.failure)
            if self._state is WorkerState.STOPPED:
                raise WorkerGaveUp(Failure("stopped", failure_sentence("shutting_down"), Recovery.KEEP_SESSION))
            if self.alive:
                return
            if await self._supervisor.wait_for_respawn():
                continue
            await self._spawn_now()

    async def _respawn(self) -> None:
        if self._state is not WorkerState.STOPPED and not self.alive:
            await self._spawn_now()

    async def _spawn_now(self) -> None:
        # A scheduled respawn and a turn that needs a process can both get here: one process, never two.
        async with self._spawning:
            if not self.alive and self._state is not WorkerState.STOPPED and not self.gave_up:
                await self._launch()

    async def _launch(self) -> None:
        if self._endpoint is None:
            binding = ToolBinding(
                registry=self._tools,
                context=lambda: self._ctx,
                on_activity=self._supervisor.tool_activity,
                descriptions=self._cfg.tool_descriptions,
                is_owner=self._cfg.for_owner,
            )
            endpoint = self._mcp.bind(binding)
            self._endpoint = McpEndpoint(url=endpoint.url, token=endpoint.token)
        # Only a session the CLI confirmed (and we stored) is resumed; anything else starts afresh.
        stored = self._sessions.get()
        resume = stored is not None
        session_id = stored or str(uuid.uuid4())
        launch = self._cfg.launch
        for directory in (launch.cwd, launch.home / ".claude", self._cfg.token_dir):
            private_dir(directory)
        spec = build_spec(
            launch, mcp=self._endpoint, mcp_config_path=self._mcp_config_path(), session_id=session_id, resume=resume
        )
        assert_safe(spec, launch.tool_groups)  # the last look before anything runs
        self.spawns.append(spec)
        try:
            process = await CliProcess.start(
                self.name,
                spec,
                capture_dir=self._cfg.capture_dir,
                secrets=(*self._cfg.secrets, self._endpoint.token),
                spawn=self._spawn,
                on_event=self._on_stdout,
                on_exit=self._on_exit_of,
                on_output=self._supervisor.touch,
            )
        except OSError as exc:
            self._crashed(launch_failure(launch.binary, exc))
            return
        self._process = process
        self.session_id = session_id
        cc.info("[CC.spawn] %s pid=%s %s session %s", self.name, process.pid, "resuming" if resume else "new", session_id)
        self._supervisor.watch(watched=self._mid_turn, stall=self._stalled)

    async def _on_stdout(self, process: CliProcess, event: StreamEvent) -> None:
        if isinstance(event, ControlRequest):
            await self._decline(process, event)
            return
        if isinstance(event, Init) and event.session_id and event.session_id != self.session_id:
            log.info("%s: the CLI reports session %s (expected %s)", self.name, event.session_id, self.session_id)
            self.session_id = event.session_id
        current = process is self._process and self._state is not WorkerState.STOPPED
        if isinstance(event, UserReplay) and event.session_id and current:
            # The CLI echoes a message once it is in the conversation on disk: from here a crash resumes it.
            self._sessions.set(event.session_id)
        self._queue.put_nowait(event)

    async def _decline(self, process: CliProcess, event: ControlRequest) -> None:
        # Permission prompts are switched off; anything the CLI still asks is declined, never left hanging.
        log.warning("%s: declined a control request from the CLI: %s", self.name, event.subtype)
        response = {"subtype": "error", "request_id": event.request_id, "error": "not supported by this host"}
        await process.send({"type": "control_response", "response": response})

    def _on_exit_of(self, process: CliProcess, exited: Exited) -> None:
        if not exited.expected and self._state is not WorkerState.STOPPED:
            self._crashed(exit_failure(exited.code, process.stderr_tail, ending=process.ending, reason=exited.reason))
        self._last_exit = exited
        self._queue.put_nowait(exited)

    def _crashed(self, failure: Failure) -> None:
        self._supervisor.crashed(failure, self._respawn)
        if failure.kind == "session_missing" and not self.gave_up:
            log.warning("%s: the stored session %s is gone; the next process starts a fresh one", self.name, self.session_id)
            self._sessions.clear()

    def _mid_turn(self) -> bool:
        return self._state in (WorkerState.RUNNING, WorkerState.SETTLING) and self.alive

    async def _stalled(self, silent: float) -> None:
        self._kill(f"it was silent for {silent:.0f}s mid-turn", expected=False)

    def _mcp_config_path(self) -> Path:
        # Per worker instance: a replaced worker's cleanup must not remove its successor's file.
        return mcp_config_path(self._cfg.token_dir, self.name, self._instance)

    def _track(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


__all__ = ["ClaudeCodeWorker", "WorkerState"]
