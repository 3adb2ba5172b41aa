"""Single mode with Claude Code as the executor: each chat's turns run on that chat's own CLI worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from bicameral import prompts
from bicameral.child_env import child_process_env
from bicameral.claude_code.compaction import compact_if_full
from bicameral.claude_code.config import ClaudeCodeConfig, WorkerConfig
from bicameral.claude_code.exchange import Prompt, TurnOutcome, prompt_images
from bicameral.claude_code.failures import Failure, Recovery, classify
from bicameral.claude_code.process import Spawn, cli_version, spawn_process
from bicameral.claude_code.spec import (
    MCP_NAMESPACE,
    MIN_VERSION,
    our_name,
    parse_version,
    too_old,
)
from bicameral.claude_code.stream import StreamEvent, ToolUse
from bicameral.claude_code.supervision import CrashBudget, SessionIds
from bicameral.claude_code.worker import ClaudeCodeWorker
from bicameral.context.envelope import content_blocks
from bicameral.context.memory import burst_text, prompt_note
from bicameral.delivery.progress import ProgressNote
from bicameral.errors import ConfigError
from bicameral.events import Authority, Inbound, SendText, chat_key, owner_on
from bicameral.failures import executor_crash_loop, executor_gave_up, failure_sentence, stopped_turn
from bicameral.markup import quoteattr
from bicameral.mcp.plugins import (
    PluginsConfig,
    load_plugins,
    visible_tools,
)
from bicameral.mcp.server import McpToolServer
from bicameral.models.base import ImageBlock, TextBlock, summarize_call
from bicameral.scheduler.retry import FireRetry, gave_up, scheduled_task
from bicameral.store import Stores
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry
from bicameral.turns.turn import Turn
from bicameral.types import Perform

log = logging.getLogger(__name__)


SESSION_KEY_PREFIX = "claude_code.session:"
# An idle chat's process is stopped after this long (its session is kept and resumed on the next message).
IDLE_STOP_SECONDS = 900.0
_REAP_EVERY = 60.0
_NUDGE = (
    "<error>You wrote a reply but did not send it, so the user saw nothing. Text you write is not delivered: "
    f"send your answer now with {MCP_NAMESPACE}__send_message (or {MCP_NAMESPACE}__reply_to_message).</error>"
)
# How our messaging tools read to the CLI: there is no automatic final reply in this mode.
_DESCRIPTIONS = {
    "send_message": "Send a message to this chat. This is the only way your answer reaches the user: "
    "every reply goes through this tool (plain text you write is not delivered).",
}


@dataclass(frozen=True)
class ChamberConfig:
    """What the Claude Code chamber is given beyond the CLI's `ClaudeCodeConfig`: the bot's name, when the progress
    note shows, how often text written but not sent is nudged, the session size that starts a compaction, and how a
    scheduled task's run is retried."""

    bot_name: str
    progress_note_after_seconds: float
    dropped_text_max_retries: int
    compact_tokens: int
    scheduled_retry: FireRetry


class ClaudeCodeChamber:
    """The TurnHandler for `single` mode when BICAMERAL_BACK_MODEL is `claude-code:<model>`."""

    # One worker (one CLI process, one session) per chat: a worker runs one turn at a time, so every
    # MCP tool call belongs to exactly one running turn; chats never share a context and never wait
    # for each other. Session ids persist in the kv store and are resumed after a restart.

    def __init__(
        self,
        cli: ClaudeCodeConfig,
        config: ChamberConfig,
        stores: Stores,
        registry: ToolRegistry,
        perform: Perform,
        *,
        on_fatal: Callable[[str], None] = lambda reason: None,
        base_env: Mapping[str, str] | None = None,
        spawn: Spawn = spawn_process,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._cli = cli
        self._config = config
        self._stores = stores
        self._perform = perform
        self._on_fatal = on_fatal
        self._base_env = dict(base_env) if base_env is not None else child_process_env()
        self._spawn = spawn
        self._clock = clock
        self._sleep = sleep
        self.plugins: PluginsConfig = load_plugins(cli.plugins_path)
        self._tools = visible_tools(registry, self.plugins)
        self._mcp = McpToolServer()
        self._budget = CrashBudget(cli.crash_limit, cli.crash_window_seconds, clock=clock)
        self._workers: dict[str, ClaudeCodeWorker] = {}
        self._owner_chats: set[str] = set()
        self._background: set[asyncio.Future[None]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._gave_up = False
        self._retry = config.scheduled_retry
        self._template = prompts.load("claude_code.md")

    # --- TurnHandler ---

    async def start(self) -> None:
        reported = await cli_version(self._cli.binary, self._base_env)
        if too_old(parse_version(reported or "")):
            raise ConfigError(
                f"{self._cli.binary} is Claude Code {reported}; the executor needs "
                f"{'.'.join(map(str, MIN_VERSION))} or newer: npm install -g @anthropic-ai/claude-code@latest"
            )
        log.info("Claude Code executor: %s (%s)", self._cli.binary, reported or "version unknown")
        await self._mcp.start()
        self._reaper = asyncio.create_task(self._reap_idle(), name="claude-code-reaper")

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        workers, self._workers = list(self._workers.values()), {}
        await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
        for task in list(self._background):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5)
        await self._mcp.stop()

    def reset(self, chat: str) -> None:
        """A fresh CLI session for the chat: the stored session id goes, the process is replaced."""
        self._session_ids(chat).clear()
        worker = self._workers.pop(chat, None)
        if worker is not None:
            self._in_background(worker.stop())

    async def release(self, chat: str) -> None:
        """Another worker may answer the chat next (several workers): its process stops, as a live one would not know
        those turns; the session stays stored, and a turn here later resumes the latest one from the kv store."""
        worker = self._workers.pop(chat, None)
        if worker is not None:
            log.info("%s: stopping its executor, this worker no longer holds the chat (the session is kept)", chat)
            await worker.stop()

    async def interrupt(self, chat: str, by: Authority | None = None) -> bool:
        """`/stop`: the cancelled turn already asked its CLI to stop; make sure a settling one is told too.

        A member's own /stop (`by`) reaches only their own turn, which the conversation cancelled already.
        """
        worker = self._workers.get(chat)
        if by is not None or worker is None or not worker.busy:
            return False
        await worker.interrupt()
        return True

    async def handle(self, turn: Turn) -> None:
        if _owner_dm(turn):
            self._owner_chats.add(turn.chat)
        worker = self._worker(turn)
        ctx = turn.tool_context(self._stores, self._cli.data_dir, self._cli.sending)
        first = self.prompt(turn.batch)
        budget = self._cli.memory_inject_tokens
        remembered = await prompt_note(self._stores, ctx.reach, turn.chat, burst_text(turn.batch), budget)
        if remembered:
            first = replace(first, text=f"{remembered}\n\n{first.text}")

        def drain() -> list[Prompt]:
            batch = turn.drain_injected()
            return [self.prompt(batch)] if batch else []

        def undelivered() -> bool:
            return not ctx.sent_message_ids

        progress = ProgressNote(
            turn.perform, turn.chat, after=self._config.progress_note_after_seconds, thread_id=turn.thread_id
        )

        async def on_event(event: StreamEvent) -> None:
            if not isinstance(event, ToolUse):
                return
            tool = self._tools.get(our_name(event.name))
            if tool is not None and tool.messaging:
                await progress.close()  # the answer is going out: the note has done its job
            else:
                await progress.step(summarize_call(our_name(event.name), event.input))

        async def attempt(failed: TurnOutcome | None) -> TurnOutcome:
            if failed is not None and failed.failure is not None and failed.failure.recovery is Recovery.FRESH_SESSION:
                await worker.reset_session()
            outcome = await worker.run_turn(first, ctx, drain=drain, on_event=on_event, may_restart=undelivered)
            if outcome.failure is not None and outcome.failure.retry:
                # The stored session could not be reopened: the same turn once more, in a fresh one.
                log.warning("%s: %s; retrying the turn in a fresh session", turn.chat, outcome.failure.kind)
                await worker.reset_session()
                await self._say(turn, outcome.failure.message)
                outcome = await worker.run_turn(first, ctx, drain=drain, on_event=on_event, may_restart=undelivered)
            return outcome

        def failed(outcome: TurnOutcome) -> bool:
            # Worth another try only while nothing went out and the executor has not given up for good.
            failure = outcome.failure
            return failure is not None and failure.recovery is not Recovery.GIVE_UP and not worker.gave_up and undelivered()

        schedule_id = scheduled_task(turn.batch)
        progress.start()
        try:
            if schedule_id is None:
                outcome, tries = await attempt(None), 1
            else:  # nobody is waiting on a scheduled task: worth a patient retry before telling them it failed
                outcome, tries = await self._retry.run(attempt, failed, sleep=self._sleep)
            last_text = outcome.final_text
            nudges = 0
            while self._dropped_text(outcome, ctx) and nudges < self._config.dropped_text_max_retries:
                nudges += 1
                log.warning(
                    "[CC.dropped] %s wrote text but sent nothing; nudge %d: %s", turn.chat, nudges, outcome.final_text[:120]
                )
                outcome = await worker.run_turn(Prompt(_NUDGE), ctx, drain=drain, on_event=on_event, may_restart=undelivered)
                last_text = outcome.final_text or last_text
        finally:
            await progress.close()
        scheduled = (schedule_id, tries) if schedule_id is not None else None
        await self._conclude(turn, ctx, worker, outcome, last_text, scheduled)
        if outcome.ok:
            # After the answer is out, so it never waits for this.
            await compact_if_full(worker, ctx, outcome.context_tokens, self._config.compact_tokens)

    # --- the turn's end ---

    @staticmethod
    def _dropped_text(outcome: TurnOutcome, ctx: ToolContext) -> bool:
        return outcome.ok and bool(outcome.texts) and not ctx.sent_message_ids

    async def _conclude(
        self,
        turn: Turn,
        ctx: ToolContext,
        worker: ClaudeCodeWorker,
        outcome: TurnOutcome,
        last_text: str,
        scheduled: tuple[int, int] | None = None,
    ) -> None:
        failure = outcome.failure
        if failure is not None:
            await self._report(turn, ctx, worker, failure, unfinished=outcome.unfinished, scheduled=scheduled)
        elif outcome.stop_reason is not None:
            await self._say(turn, stopped_turn(outcome.stop_reason))
        elif self._dropped_text(outcome, ctx):
            # Still unsent after the nudges: the CLI's own diagnostics get a plain explanation,
            # anything else is the model's answer and is delivered for it.
            found = classify(*outcome.synthetic)
            log.warning("[CC.dropped] %s gave up nudging (%s)", turn.chat, found.kind if found else "delivering the text")
            await self._say(turn, found.message if found is not None else last_text)

    async def _report(
        self,
        turn: Turn,
        ctx: ToolContext,
        worker: ClaudeCodeWorker,
        failure: Failure,
        *,
        unfinished: bool = False,
        scheduled: tuple[int, int] | None = None,
    ) -> None:
        """Tell the chat why its turn failed; for a scheduled task (its id, how often it was tried), say it didn't run."""
        log.warning("%s: turn failed (%s, %s): %s", turn.chat, failure.kind, failure.recovery.value, failure.detail[:300])
        if failure.recovery is Recovery.GIVE_UP or worker.gave_up:
            return  # everyone is told by the give-up notice
        if failure.kind in ("crash", "stalled") and ctx.sent_message_ids and not unfinished:
            return  # the answer got out before the process died: nothing untrue to correct
        if failure.recovery is Recovery.FRESH_SESSION:
            await worker.reset_session()
        text = failure.message
        if scheduled is not None:
            schedule_id, tries = scheduled
            text = gave_up(schedule_id, text, tries, self._stores.schedules)
        await self._say(turn, text)

    async def _say(self, turn: Turn, text: str) -> None:
        await turn.perform(SendText(chat=turn.chat, text=text, reply_to=turn.reply_anchor, thread_id=turn.thread_id))

    # --- workers ---

    def _worker(self, turn: Turn) -> ClaudeCodeWorker:
        worker = self._workers.get(turn.chat)
        if worker is None:
            worker_config = WorkerConfig.for_chat(
                self._cli,
                chat=turn.chat,
                for_owner=_owner_dm(turn),
                system_prompt=self.system_prompt(turn.batch[0]),
                tool_groups=self.plugins.tool_groups,
                base_env=self._base_env,
                tool_descriptions=_DESCRIPTIONS,
            )
            worker = ClaudeCodeWorker(
                turn.chat,
                worker_config,
                sessions=self._session_ids(turn.chat),
                mcp=self._mcp,
                tools=self._tools,
                budget=self._budget,
                on_giveup=self._give_up,
                spawn=self._spawn,
                clock=self._clock,
                sleep=self._sleep,
            )
            self._workers[turn.chat] = worker
        return worker

    def worker_for(self, chat: str) -> ClaudeCodeWorker | None:
        return self._workers.get(chat)

    def _session_ids(self, chat: str) -> SessionIds:
        return SessionIds(self._stores.kv, SESSION_KEY_PREFIX + chat)

    def system_prompt(self, first: Inbound) -> str:
        # Names and titles are quoted as values: a name with line breaks or instructions stays a name.
        if first.is_private:
            kind = f"a private chat with {quoteattr(first.sender.name)}"
        else:
            kind = f"the group {quoteattr(first.chat_title or first.chat)}"
        return self._template.format(bot_name=self._config.bot_name, chat_kind=kind, namespace=MCP_NAMESPACE)

    def prompt(self, batch: Sequence[Inbound]) -> Prompt:
        """A batch as one CLI message: the envelopes, then each readable photo as an image."""
        blocks = content_blocks(batch, self._cli.owner_id)
        text = next((block.text for block in blocks if isinstance(block, TextBlock)), "")
        images = prompt_images(self._cli.data_dir, (block for block in blocks if isinstance(block, ImageBlock)))
        return Prompt(text=text, images=images)

    async def _reap_idle(self) -> None:
        while True:
            await self._sleep(_REAP_EVERY)
            for chat, worker in list(self._workers.items()):
                if not worker.busy and worker.alive and worker.idle_seconds() > IDLE_STOP_SECONDS:
                    log.info("%s: stopping its idle executor (the session is kept)", chat)
                    self._workers.pop(chat, None)
                    self._in_background(worker.stop())

    # --- giving up ---

    async def _give_up(self, failure: Failure) -> None:
        """Tell the owner and every active chat, then stop the application with a failure status."""
        if self._gave_up:
            return
        self._gave_up = True
        if failure.recovery is Recovery.GIVE_UP:
            text = executor_gave_up(failure.message)
        else:
            lead = failure.message
            if failure.kind in ("crash", "stalled"):
                lead = failure_sentence("crash_loop")
            window = max(1, round(self._cli.crash_window_seconds / 60))
            text = executor_crash_loop(lead, self._budget.recent, window)
        chats = set(self._workers) | self._owner_chats
        owner = owner_on(self._cli.owner_id, "telegram")
        if not self._owner_chats and owner is not None:
            chats.add(chat_key("telegram", owner))
        for chat in sorted(chats):
            result = await self._perform(SendText(chat=chat, text=text))
            if not result.ok:
                log.warning("could not tell %s that the executor gave up: %s", chat, result.error)
        log.critical("the Claude Code executor gave up: %s (%s)", failure.kind, failure.detail[:300])
        self._on_fatal(f"the Claude Code executor gave up ({failure.kind})")

    def _in_background(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _owner_dm(turn: Turn) -> bool:
    """The owner's own chat (a DM or the terminal): the only one whose CLI gets the unlocked tool groups."""
    return turn.is_owner and turn.batch[-1].is_private
