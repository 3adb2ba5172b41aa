"""Claude Code as the back chamber: each bus task runs in its own supervised CLI session."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from bicameral import prompts
from bicameral.channels.base import Channel, own_chats
from bicameral.child_env import child_process_env
from bicameral.claude_code.config import ClaudeCodeConfig, WorkerConfig
from bicameral.claude_code.exchange import Prompt, PromptImage, prompt_images
from bicameral.claude_code.failures import Recovery
from bicameral.claude_code.spec import our_name
from bicameral.claude_code.stream import StreamEvent, ToolUse
from bicameral.claude_code.supervision import CrashBudget, SessionIds
from bicameral.claude_code.worker import ClaudeCodeWorker
from bicameral.context.memory import prompt_note, task_reach
from bicameral.failures import failure_sentence, stopped_task
from bicameral.mcp.plugins import load_plugins, visible_tools
from bicameral.mcp.server import McpToolServer
from bicameral.models.base import summarize_call
from bicameral.models.metered import CAP
from bicameral.models.scope import current_spender
from bicameral.store import Stores
from bicameral.tasks.brief import no_direct_messages, task_brief, task_images, task_outgoing
from bicameral.tasks.executor import Executor, TaskControl, acting_for
from bicameral.tasks.task import NOTHING_TO_REPORT, Task, TaskOutcome
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

SESSION_KEY_PREFIX = "claude_code.task:"


class ClaudeCodeExecutor(Executor):
    """The bus's Executor on the Claude Code CLI; the CLI session is the task's checkpoint."""

    # A redirect or a restart makes a new worker on the same session key, so `--resume` keeps every
    # finished step; the new instruction arrives as the next message of that session.

    def __init__(
        self, config: ClaudeCodeConfig, stores: Stores, registry: ToolRegistry,
        check: Callable[[tuple[str, ...]], str | None] | None = None,
        channels: Sequence[Channel] = (),
    ) -> None:
        self._config = config
        self._own = own_chats(config.owner_id, channels)  # as the channels know them: a Matrix DM is a room of its own
        self._check = check  # the spending caps, before each CLI turn (its own calls are not counted)
        self._stores = stores
        self._plugins = load_plugins(config.plugins_path)
        self._tools = visible_tools(registry, self._plugins).subset(exclude_messaging=True)
        self._system = prompts.load("back.md")
        self._base_env = child_process_env()
        self._mcp = McpToolServer()
        self._budget = CrashBudget(config.crash_limit, config.crash_window_seconds)

    async def start(self) -> None:
        await self._mcp.start()

    async def stop(self) -> None:
        await self._mcp.stop()

    async def run(self, task: Task, control: TaskControl) -> TaskOutcome:
        spender = current_spender.get()  # the bus sets the task's people
        if self._check is not None and (refused := self._check(spender.people if spender else ())) is not None:
            log.info("task %s not started: %s", task.id, refused)
            return TaskOutcome(error_kind=CAP, error=failure_sentence(CAP), retryable=False)
        sessions = SessionIds(self._stores.kv, SESSION_KEY_PREFIX + task.id)
        # The owner's unlocked CLI tools only for the owner's own words in the owner's own chat.
        for_owner = self._owner_chat(task.chat) and (task.authority is None or task.authority.is_owner)
        worker_config = WorkerConfig.for_chat(
            self._config,
            chat=task.chat,
            for_owner=for_owner,
            system_prompt=self._system,
            tool_groups=self._plugins.tool_groups,
            base_env=self._base_env,
        )
        worker = ClaudeCodeWorker(
            f"task:{task.id}", worker_config, sessions=sessions, mcp=self._mcp, tools=self._tools, budget=self._budget
        )
        notes = control.drain_notes()
        images: tuple[PromptImage, ...] = ()
        reach = task_reach(self._stores, task.chat, task.origin_message, self._config.owner_id, task.authority)
        if sessions.get() is not None:
            # A resumed session already holds the brief and the finished steps; send what changed.
            text = "\n".join(notes) or "Continue the task where you left off and finish with the result."
        else:
            about = f"{task.spec}\n{task.context}"
            remembered = await prompt_note(self._stores, reach, task.chat, about, self._config.memory_inject_tokens)
            text = "\n".join(filter(None, [remembered, task_brief(task), *notes]))
            images = prompt_images(self._config.data_dir, task_images(task))
        ctx = ToolContext(
            chat=task.chat,
            turn_id=task.id,
            data_dir=self._config.data_dir,
            perform=no_direct_messages,
            stores=self._stores,
            authority=acting_for(task, legacy_owner=for_owner),
            reach=reach,
            outgoing=task_outgoing(
                task, control, max_files=self._config.sending.max_files, max_bytes=self._config.sending.max_bytes
            ),
            hold_files=True,
        )

        async def on_event(event: StreamEvent) -> None:
            if isinstance(event, ToolUse):
                await control.progress(summarize_call(our_name(event.name), event.input))

        try:
            outcome = await worker.run_turn(
                Prompt(text=text, images=images),
                ctx,
                drain=lambda: self._notes(control, ctx),
                on_event=on_event,
            )
        finally:
            await worker.stop()
        if outcome.failure is not None:
            failure = outcome.failure
            if failure.recovery is Recovery.FRESH_SESSION:
                sessions.clear()
            return TaskOutcome(
                error_kind=failure.kind, error=failure.message, retryable=failure.recovery is not Recovery.GIVE_UP
            )
        if outcome.stop_reason:
            return TaskOutcome(error_kind="stopped", error=stopped_task(outcome.stop_reason))
        return TaskOutcome(result=outcome.final_text or NOTHING_TO_REPORT)

    @staticmethod
    def _notes(control: TaskControl, ctx: ToolContext) -> list[Prompt]:
        """Notes added since the last step; their authors' (possibly lower) rights ride from here on."""
        notes = control.drain_notes()
        if notes:
            ctx.authority = control.authority() or ctx.authority
        return [Prompt(text=n) for n in notes]

    def _owner_chat(self, chat: str) -> bool:
        """A task from the owner's own chat (their DM, or a trusted local channel) may use what the owner unlocked."""
        return self._own(chat)
