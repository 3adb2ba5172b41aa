"""One supervised `claude` process running one turn at a time: spawn, resume, liveness, inject, interrupt, breaker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from bicameral.agent.breakers import Breakers
from bicameral.backoff import backoff_delay
from bicameral.claude_code.capture import WireCapture, capture_dir
from bicameral.claude_code.failures import (
    Failure,
    Recovery,
    classify,
    classify_rejected_turn,
    crash_failure,
)
from bicameral.claude_code.spec import (
    LaunchOptions,
    McpEndpoint,
    SpawnSpec,
    assert_safe,
    build_spec,
)
from bicameral.claude_code.stream import (
    ApiRetry,
    AssistantText,
    ControlRequest,
    Init,
    Result,
    StreamEvent,
    ToolResult,
    ToolUse,
    UserReplay,
    parse_line,
)
from bicameral.claude_code.supervision import CrashBudget, SessionIds
from bicameral.claude_code.turn import (
    Prompt,
    TurnLedger,
    TurnOutcome,
    continuation,
    merged,
)
from bicameral.config import Settings
from bicameral.mcp.plugins import ToolGroups
from bicameral.mcp.server import McpToolServer, ToolBinding
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry
from bicameral.types import Clock, Sleep

log = logging.getLogger(__name__)
cc = logging.getLogger("bicameral.cc")

Spawn = Callable[[SpawnSpec], Awaitable[asyncio.subprocess.Process]]

# A line of stream-json can carry a whole image (the replay of a photo we sent): allow big lines.
_LINE_LIMIT = 64 * 1024 * 1024
_STDERR_TAIL = 40
_TICK = 0.2  # how often a running turn looks for injected messages
_INTERRUPT_GRACE = 10.0  # seconds an interrupted turn gets to end before the process is killed
_POST_RESULT_GRACE = 3.0  # seconds to wait for an injected message the CLI has not taken yet
_MAX_RESTARTS_PER_TURN = 2
_HOPELESS_STATUSES = (401, 402, 403)  # API errors the CLI retries although a retry cannot help
_STOP_GRACE = 3.0


@dataclass
class WorkerConfig:
    """How to launch and supervise a worker; `WorkerConfig.from_settings` fills it from Settings."""

    binary: str
    model: str
    effort: str
    workdir: Path
    capture_dir: Path
    system_prompt: str = ""
    tool_groups: ToolGroups = ToolGroups()
    base_env: Mapping[str, str] = field(default_factory=dict)
    api_key: str | None = None
    base_url: str | None = None
    oauth_token: str | None = None
    tool_descriptions: Mapping[str, str] = field(default_factory=dict)
    liveness_timeout: float = 300.0
    liveness_poll: float = 30.0
    backoff_base: float = 2.0
    backoff_cap: float = 64.0
    tool_error_max: int = 3
    tool_error_window: float = 60.0
    secrets: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        system_prompt: str,
        tool_groups: ToolGroups,
        base_env: Mapping[str, str],
        tool_descriptions: Mapping[str, str] | None = None,
    ) -> WorkerConfig:
        def secret(value: SecretStr | None) -> str | None:
            return (value.get_secret_value() or None) if value is not None else None

        data_dir = settings.data_dir.resolve()
        return cls(
            binary=settings.claude_bin,
            model=settings.back.model,
            effort=settings.claude_effort,
            workdir=data_dir / "claude_code",
            capture_dir=capture_dir(data_dir),
            system_prompt=system_prompt,
            tool_groups=tool_groups,
            base_env=dict(base_env),
            api_key=secret(settings.anthropic_api_key),
            base_url=settings.anthropic_base_url,
            oauth_token=secret(settings.claude_oauth_token),
            tool_descriptions=dict(tool_descriptions or {}),
            liveness_timeout=settings.liveness_timeout_seconds,
            liveness_poll=settings.liveness_poll_seconds,
            backoff_base=settings.crash_backoff_base,
            backoff_cap=settings.crash_backoff_cap,
            tool_error_max=settings.tool_error_max_count,
            tool_error_window=settings.tool_error_window_seconds,
            secrets=tuple(settings.secret_values()),
        )


@dataclass(frozen=True)
class _Exited:
    pid: int
    code: int | None
    reason: str
    expected: bool


class WorkerGaveUp(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


async def spawn_process(spec: SpawnSpec) -> asyncio.subprocess.Process:
    """Start the CLI in its own process group, so a Ctrl-C aimed at us does not kill it behind our back."""
    return await asyncio.create_subprocess_exec(
        *spec.argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(spec.cwd),
        env=dict(spec.env),
        limit=_LINE_LIMIT,
        start_new_session=True,
    )


async def cli_version(binary: str, env: Mapping[str, str], timeout: float = 20.0) -> str | None:
    """What `claude --version` prints, or None if it does not run."""
    try:
        proc = await asyncio.create_subprocess_exec(
            binary, "--version",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=dict(env),
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None
    return out.decode("utf-8", errors="replace").strip() if proc.returncode == 0 else None


class ClaudeCodeWorker:
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
        self._budget = budget
        self._on_giveup = on_giveup
        self._spawn = spawn
        self._clock = clock
        self._sleep = sleep
        self._proc: asyncio.subprocess.Process | None = None
        self._queue: asyncio.Queue[StreamEvent | _Exited] = asyncio.Queue()
        self._getter: asyncio.Task | None = None
        self._busy = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._respawn: asyncio.Task | None = None
        self._watchdog: asyncio.Task | None = None
        self._endpoint: McpEndpoint | None = None
        self._ctx: ToolContext | None = None
        self._turn_active = False
        self._in_flight = False  # a prompt of the current turn is with the CLI and its result is not in
        self._tools_running = 0
        self._last_activity = clock()
        self._last_turn_end = clock()
        self._kill_reason: str | None = None
        self._expected_exit = False
        self._stopping = False
        self._consecutive_crashes = 0
        self._failure: Failure | None = None  # set once the worker gave up
        self._stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL)
        self._last_crash: Failure | None = None
        self._last_pid: int | None = None
        self._last_exit: _Exited | None = None
        self.session_id: str | None = sessions.get()
        self._instance = uuid.uuid4().hex[:8]
        # The most recent spawns, newest last: what was really run (tests and `doctor` look here).
        self.spawns: deque[SpawnSpec] = deque(maxlen=20)

    # --- state ---

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.alive and self._proc is not None else None

    @property
    def busy(self) -> bool:
        return self._busy.locked()

    @property
    def gave_up(self) -> bool:
        return self._failure is not None

    def idle_seconds(self) -> float:
        return 0.0 if self.busy else self._clock() - self._last_turn_end

    # --- lifecycle ---

    async def start(self) -> None:
        """Bind to the MCP server and spawn the process (resuming the stored session, if any)."""
        await self._ensure_running()

    async def stop(self) -> None:
        """End the process cleanly (stdin closed, then terminate, then kill); the session id is kept."""
        self._stopping = True
        for task in (self._respawn, self._watchdog):
            if task is not None:
                task.cancel()
        await self._terminate("worker stopped")
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
        await self._terminate("fresh session requested")
        if not self._stopping and not self.gave_up:
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
            self._turn_active = True
            self._touch()
            self._in_flight = True
            breakers = Breakers(self._cfg.tool_error_max, self._cfg.tool_error_window, clock=self._clock)
            state = TurnLedger(pid=self._last_pid, breakers=breakers)
            state.sent(await self._write(prompt), prompt)
            while True:
                if drain is not None and state.interrupted_at is None:
                    for extra in drain():
                        state.sent(await self._write(extra), extra)
                        outcome.injected += 1
                event = await self._next(_TICK)
                lost = self._last_exit
                if event is None and lost is not None and lost.pid == state.pid and lost.pid not in state.handled_exits:
                    event = lost  # the exit happened before this turn could see its event
                if event is None:
                    if await self._waited_too_long(state):
                        break
                    continue
                if on_event is not None and not isinstance(event, _Exited):
                    try:
                        await on_event(event)
                    except Exception:  # an observer's bug must not desynchronise the turn
                        log.exception("%s: an event observer failed", self.name)
                if await self._apply(event, state, outcome, may_restart):
                    break
            self._in_flight = False
            return outcome
        except BaseException:
            # `/stop` (a cancellation) or a bug: if the CLI is still working on this turn, a background
            # task stops it and holds the worker until it has, so the next turn starts clean.
            if self._in_flight:
                handed_off = True
                self._ctx = None
                self._track(asyncio.create_task(self._settle_cancelled(), name=f"settle:{self.name}"))
            raise
        finally:
            if not handed_off:
                self._end_turn()

    async def _apply(
        self, event: StreamEvent | _Exited, state: TurnLedger, outcome: TurnOutcome, may_restart: Callable[[], bool] | None
    ) -> bool:
        """Fold one event into the turn; True when the turn is over."""
        if isinstance(event, UserReplay):
            state.pending.discard(event.uuid)
        elif isinstance(event, AssistantText) and not event.subagent:
            (outcome.synthetic if event.synthetic else outcome.texts).append(event.text)
            cc.info("[CC.text] %s | %s", self.name, _preview(event.text))
        elif isinstance(event, ToolUse) and not event.subagent:
            state.names[event.id] = event.name
            outcome.tool_uses.append(event)
            args = json.dumps(dict(event.input), ensure_ascii=False, default=str)
            cc.info("[CC.tool→] %s %s(%s) id=%s", self.name, event.name, _preview(args), event.id)
        elif isinstance(event, ToolResult) and not event.subagent:
            await self._on_tool_result(event, state, outcome)
        elif isinstance(event, Result):
            return await self._on_result(event, state, outcome)
        elif isinstance(event, Init):
            state.result_at = None
        elif isinstance(event, ApiRetry):
            await self._on_api_retry(event, state, outcome)
        elif isinstance(event, _Exited) and event.pid == state.pid and event.pid not in state.handled_exits:
            state.handled_exits.add(event.pid)
            return await self._on_exit(event, state, outcome, may_restart)
        return False

    async def _on_tool_result(self, event: ToolResult, state: TurnLedger, outcome: TurnOutcome) -> None:
        mark = "✗" if event.is_error else "✓"
        cc.info("[CC.tool%s] %s id=%s | %s", mark, self.name, event.tool_use_id, _preview(event.content))
        outcome.tool_errors += event.is_error
        tripped = state.breakers.after_call(state.names.get(event.tool_use_id, "a tool"), event.is_error)
        if tripped and outcome.stopped is None:
            outcome.stopped = tripped
            log.warning("%s: tool-error breaker tripped: %s", self.name, tripped)
            self._ctx = None  # calls the CLI still makes before the interrupt lands are refused
            await self.interrupt()
            state.interrupted_at = self._clock()

    async def _on_api_retry(self, event: ApiRetry, state: TurnLedger, outcome: TurnOutcome) -> None:
        cc.info("[CC.retry] %s attempt %d/%d: %s %s", self.name, event.attempt, event.max_retries, event.status, event.error)
        if event.status not in _HOPELESS_STATUSES or event.attempt < 2 or state.interrupted_at is not None:
            return
        # Rejected credentials or an exhausted plan do not heal within the CLI's minutes of retries: say so now.
        failure = classify(event.error, status=event.status)
        if failure is not None and outcome.failure is None:
            outcome.failure = failure
            log.warning("%s: %s on every try; stopping the turn", self.name, failure.kind)
            self._ctx = None
            await self.interrupt()
            state.interrupted_at = self._clock()

    async def _on_result(self, event: Result, state: TurnLedger, outcome: TurnOutcome) -> bool:
        outcome.result = event
        outcome.session_id = event.session_id or outcome.session_id
        flag = " (error)" if event.is_error else ""
        cc.info("[CC.done] %s %s%s %.1fs | %s", self.name, event.subtype, flag, event.duration_ms / 1000, _preview(event.text))
        if state.interrupted_at is not None:
            return True  # the interrupt we asked for: not a failure of the session
        if event.is_error:
            evidence = event.text or " ".join(outcome.synthetic)
            failure = classify_rejected_turn(evidence, event.api_error_status, self._stderr_tail)
            log.warning("%s: turn rejected (%s): %s", self.name, failure.kind, _preview(failure.detail))
            unconfirmed = failure.kind == "session_missing" and not self._sessions.confirmed()
            if unconfirmed and outcome.restarts < _MAX_RESTARTS_PER_TURN:
                # It died before its first turn reached the disk: nothing is lost by starting afresh.
                outcome.restarts += 1
                await self.reset_session()
                again = merged(state.unsettled())
                state.restart(await self._write(again), again, self._last_pid)
                return False
            outcome.failure = failure
            return True
        self._sessions.confirm(event.session_id)
        self.session_id = event.session_id or self.session_id
        self._consecutive_crashes = 0
        state.settle()
        diagnosis = classify(*outcome.synthetic) if outcome.synthetic else None
        if diagnosis is not None:
            outcome.failure = diagnosis  # the CLI wrote in the model's place (an API problem it reports as text)
            return True
        if not state.pending:
            return True
        state.result_at = self._clock()  # an injected message will run as the CLI's next turn: keep going
        return False

    async def _on_exit(
        self, event: _Exited, state: TurnLedger, outcome: TurnOutcome, may_restart: Callable[[], bool] | None
    ) -> bool:
        if outcome.stopped is not None:
            return True  # killed after the breaker tripped: the turn is over anyway
        if self._failure is not None:
            outcome.failure = self._failure
            return True
        unsettled = state.unsettled()
        if not unsettled:
            return True  # it died after finishing everything it was given
        # Prompts the CLI had not answered when it died are always redone once something of this turn
        # was answered; before that, the caller decides (its first answer may be out already).
        after_result = outcome.result is not None
        allowed = after_result or (may_restart() if may_restart is not None else True)
        if outcome.restarts >= _MAX_RESTARTS_PER_TURN or not allowed:
            outcome.failure = self._last_crash or crash_failure(event.code, self._stderr_tail)
            outcome.unfinished = after_result
            return True
        outcome.restarts += 1
        try:
            await self._ensure_running()
        except WorkerGaveUp as exc:
            outcome.failure = exc.failure
            return True
        self._touch()
        again = continuation(unsettled, event.reason)
        state.restart(await self._write(again), again, self._last_pid)
        return False

    async def _waited_too_long(self, state: TurnLedger) -> bool:
        """Timeouts while no event comes: an ignored interrupt, an injected message the CLI never took."""
        now = self._clock()
        if state.interrupted_at is not None and now - state.interrupted_at > _INTERRUPT_GRACE:
            await self._kill("the turn did not stop after an interrupt", expected=True)
            state.interrupted_at = None
        if state.result_at is not None and now - state.result_at > _POST_RESULT_GRACE:
            log.warning("%s: %d injected message(s) were not taken by the CLI", self.name, len(state.pending))
            return True
        return False

    # --- internals: the turn ---

    def _end_turn(self) -> None:
        self._in_flight = False
        self._ctx = None
        self._turn_active = False
        self._last_turn_end = self._clock()
        if self._busy.locked():
            self._busy.release()

    async def _settle_cancelled(self) -> None:
        try:
            if self.alive:
                await self.interrupt()
                deadline = self._clock() + _INTERRUPT_GRACE
                while self._clock() < deadline:
                    event = await self._next(_TICK)
                    if isinstance(event, (Result, _Exited)):
                        return
                await self._kill("the turn did not stop after /stop", expected=True)
        except Exception:
            log.exception("%s: settling a stopped turn failed", self.name)
        finally:
            self._end_turn()

    async def _next(self, timeout: float) -> StreamEvent | _Exited | None:
        # One long-lived getter: cancelling a get on timeout could lose an event.
        if self._getter is None or self._getter.cancelled():
            self._getter = asyncio.create_task(self._queue.get())
        done, _ = await asyncio.wait({self._getter}, timeout=timeout)
        if not done:
            return None
        event = self._getter.result()
        self._getter = None
        return event

    def _flush_stale_events(self) -> None:
        if self._getter is not None and self._getter.done() and not self._getter.cancelled():
            log.debug("%s: dropped a stale event between turns: %s", self.name, self._getter.result())
            self._getter = None
        while not self._queue.empty():
            log.debug("%s: dropped a stale event between turns: %s", self.name, self._queue.get_nowait())

    async def _write(self, prompt: Prompt) -> str:
        message_uuid = str(uuid.uuid4())
        line = prompt.stream_json(message_uuid) + "\n"
        cc.info("[CC.user] %s | %s", self.name, _preview(prompt.text))
        proc = self._proc
        if proc is None or proc.stdin is None:
            return message_uuid
        try:
            proc.stdin.write(line.encode())
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            # The exit watcher reports the death; the turn restarts from there.
            log.warning("%s: could not write to the CLI: %s", self.name, exc)
        return message_uuid

    async def _control(self, request: dict) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.returncode is not None:
            return
        line = json.dumps({"type": "control_request", "request_id": f"req_{uuid.uuid4().hex[:12]}", "request": request})
        try:
            proc.stdin.write((line + "\n").encode())
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def _answer_control(self, event: ControlRequest) -> None:
        # Permission prompts are switched off; anything the CLI still asks is declined, never left hanging.
        log.warning("%s: declined a control request from the CLI: %s", self.name, event.subtype)
        response = {"subtype": "error", "request_id": event.request_id, "error": "not supported by this host"}
        proc = self._proc
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write((json.dumps({"type": "control_response", "response": response}) + "\n").encode())
                await proc.stdin.drain()

    # --- internals: the process ---

    async def _ensure_running(self) -> None:
        """Return once a process is up; waits out a scheduled respawn, raises WorkerGaveUp after giving up."""
        while True:
            if self._failure is not None:
                raise WorkerGaveUp(self._failure)
            if self._stopping:
                raise WorkerGaveUp(Failure("stopped", "I'm shutting down.", Recovery.KEEP_SESSION))
            if self.alive:
                return
            if self._respawn is not None and not self._respawn.done():
                await asyncio.shield(self._respawn)
                continue
            await self._spawn_now()

    async def _spawn_now(self) -> None:
        if self._endpoint is None:
            binding = ToolBinding(
                registry=self._tools,
                context=lambda: self._ctx,
                on_activity=self._tool_activity,
                descriptions=self._cfg.tool_descriptions,
            )
            self._endpoint = self._mcp.bind(binding)
        # Only a session the CLI confirmed (and we stored) is resumed; anything else starts afresh.
        stored = self._sessions.get()
        resume = stored is not None
        session_id = stored or str(uuid.uuid4())
        cfg = self._cfg
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        options = LaunchOptions(
            binary=cfg.binary,
            model=cfg.model,
            effort=cfg.effort,
            cwd=cfg.workdir,
            mcp=McpEndpoint(url=self._endpoint.url, token=self._endpoint.token),
            mcp_config_path=self._mcp_config_path(),
            system_prompt=cfg.system_prompt,
            tool_groups=cfg.tool_groups,
            base_env=cfg.base_env,
            api_key=cfg.api_key,
            base_url=cfg.base_url,
            oauth_token=cfg.oauth_token,
        )
        spec = build_spec(options, session_id=session_id, resume=resume)
        for path, text in spec.files.items():
            _write_private(path, text)
        secrets = (*cfg.secrets, self._endpoint.token)
        capture = WireCapture(cfg.capture_dir, session_id, secrets=secrets)
        shown = {"argv": spec.redacted_argv(secrets), "env": spec.redacted_env(secrets), "cwd": str(spec.cwd)}
        capture.note("spawn " + json.dumps(shown))
        assert_safe(spec)  # the last look before anything runs
        self.spawns.append(spec)
        self._stderr_tail.clear()
        try:
            proc = await self._spawn(spec)
        except OSError as exc:
            capture.note(f"spawn failed: {exc}")
            capture.close()
            failure = crash_failure(None, [f"{cfg.binary}: {exc}"])
            if isinstance(exc, FileNotFoundError):
                failure = Failure("cli_missing", _CLI_MISSING, Recovery.GIVE_UP, detail=str(exc))
            self._on_crash(failure)
            return
        self._proc = proc
        self._last_pid = proc.pid
        self.session_id = session_id
        self._kill_reason = None
        self._expected_exit = False
        capture.write_meta(label=self.name, pid=proc.pid)
        cc.info("[CC.spawn] %s pid=%s %s session %s", self.name, proc.pid, "resuming" if resume else "new", session_id)
        readers = [
            self._track(asyncio.create_task(self._read_stdout(proc, capture))),
            self._track(asyncio.create_task(self._read_stderr(proc, capture))),
        ]
        self._track(asyncio.create_task(self._watch_exit(proc, readers, capture)))
        if self._watchdog is None:
            self._watchdog = asyncio.create_task(self._liveness(), name=f"liveness:{self.name}")

    async def _read_stdout(self, proc: asyncio.subprocess.Process, capture: WireCapture) -> None:
        assert proc.stdout is not None
        while True:
            try:
                raw = await proc.stdout.readline()
            except ValueError as exc:  # a line beyond the limit: lose it, keep reading
                log.warning("%s: skipped an oversized stdout line: %s", self.name, exc)
                continue
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace")
            capture.stdout(line)
            self._touch()
            for event in parse_line(line):
                if isinstance(event, ControlRequest):
                    await self._answer_control(event)
                    continue
                if isinstance(event, Init) and event.session_id and event.session_id != self.session_id:
                    log.info("%s: the CLI reports session %s (expected %s)", self.name, event.session_id, self.session_id)
                    self.session_id = event.session_id
                if isinstance(event, UserReplay) and event.session_id and proc is self._proc and not self._stopping:
                    # The CLI echoes a message once it is in the conversation on disk: from here a crash resumes it.
                    self._sessions.set(event.session_id)
                self._queue.put_nowait(event)

    async def _read_stderr(self, proc: asyncio.subprocess.Process, capture: WireCapture) -> None:
        assert proc.stderr is not None
        while True:
            try:
                raw = await proc.stderr.readline()
            except ValueError:
                continue
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip()
            capture.stderr(line)
            self._stderr_tail.append(line)
            log.debug("%s stderr: %s", self.name, line)

    async def _watch_exit(self, proc: asyncio.subprocess.Process, readers: list[asyncio.Task], capture: WireCapture) -> None:
        code = await proc.wait()
        await asyncio.gather(*readers, return_exceptions=True)
        reason = self._kill_reason or (f"it exited with code {code}" if code is not None else "it exited")
        expected = self._expected_exit or self._stopping
        capture.note(f"exit code={code} reason={reason} expected={expected}")
        capture.write_meta(label=self.name, pid=None)
        capture.close()
        if self._proc is proc:
            self._proc = None
        cc.info("[CC.exit] %s pid=%s code=%s (%s)", self.name, proc.pid, code, reason)
        if not expected:
            failure = crash_failure(code, self._stderr_tail)
            if self._kill_reason is not None and failure.kind == "crash":
                failure = Failure("stalled", _STALLED, Recovery.KEEP_SESSION, detail=reason)
            self._on_crash(failure)
        exited = _Exited(pid=proc.pid, code=code, reason=reason, expected=expected)
        self._last_exit = exited
        self._queue.put_nowait(exited)

    def _on_crash(self, failure: Failure) -> None:
        """Count the crash; respawn after a growing delay, or give up when the budget is spent."""
        self._last_crash = failure
        self._consecutive_crashes += 1
        within = self._budget.record()
        log.warning(
            "%s: executor crashed (%s: %s); %d crash(es) in the window",
            self.name, failure.kind, _preview(failure.detail), self._budget.recent,
        )
        if failure.recovery is Recovery.GIVE_UP or not within:
            self._give_up(failure)
            return
        if failure.kind == "session_missing":
            log.warning("%s: the stored session %s is gone; the next process starts a fresh one", self.name, self.session_id)
            self._sessions.clear()
        if self._stopping:
            return
        delay = backoff_delay(self._cfg.backoff_base, self._cfg.backoff_cap, self._consecutive_crashes)
        self._respawn = asyncio.create_task(self._respawn_after(delay), name=f"respawn:{self.name}")

    async def _respawn_after(self, delay: float) -> None:
        cc.info("[CC.respawn] %s in %.1fs", self.name, delay)
        await self._sleep(delay)
        if not self._stopping and self._failure is None and not self.alive:
            await self._spawn_now()

    def _give_up(self, failure: Failure) -> None:
        if self._failure is not None:
            return
        self._failure = failure
        log.error("%s: executor gave up after %d crash(es): %s", self.name, self._budget.recent, failure.detail)
        if self._on_giveup is not None:
            self._track(asyncio.create_task(self._on_giveup(failure), name=f"giveup:{self.name}"))

    async def _liveness(self) -> None:
        """Kill a process that is silent mid-turn (no output, no tool call running) past the timeout."""
        while not self._stopping:
            await self._sleep(self._cfg.liveness_poll)
            silent = self._clock() - self._last_activity
            if self._turn_active and self.alive and self._tools_running == 0 and silent > self._cfg.liveness_timeout:
                log.warning("%s: silent for %.0fs mid-turn; killing it to resume", self.name, silent)
                await self._kill(f"it was silent for {silent:.0f}s mid-turn", expected=False)

    async def _kill(self, reason: str, *, expected: bool) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        self._kill_reason = reason
        self._expected_exit = expected
        with contextlib.suppress(ProcessLookupError):
            proc.kill()

    async def _terminate(self, reason: str) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        self._expected_exit = True
        self._kill_reason = reason
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        for signal_it in (None, proc.terminate, proc.kill):
            if signal_it is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal_it()
            try:
                await asyncio.wait_for(proc.wait(), _STOP_GRACE)
                break
            except TimeoutError:
                continue
        # Let the exit watcher record the exit before a new process can start.
        for _ in range(50):
            if self._proc is not proc:
                break
            await asyncio.sleep(0.01)

    def _mcp_config_path(self) -> Path:
        # Per worker instance: a replaced worker's cleanup must not remove its successor's file.
        return self._cfg.workdir / f".mcp-{_slug(self.name)}-{self._instance}.json"

    def _tool_activity(self, started: bool) -> None:
        self._tools_running += 1 if started else -1
        self._touch()

    def _touch(self) -> None:
        self._last_activity = self._clock()

    def _track(self, task: asyncio.Task) -> asyncio.Task:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


_CLI_MISSING = (
    "My executor (the Claude Code CLI) is not installed where I expect it. The owner needs to install it "
    "or set BICAMERAL_CLAUDE_BIN."
)
_STALLED = "My executor stopped responding while working on this."


def _write_private(path: Path, text: str) -> None:
    """Write a file only this user can read (it holds the MCP bearer token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o600)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80]


def _preview(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


__all__ = ["ClaudeCodeWorker", "WorkerConfig", "WorkerGaveUp", "cli_version", "spawn_process"]
