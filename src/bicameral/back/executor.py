"""The native executor: runs a task with the agent loop, checkpointing every step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bicameral import prompts
from bicameral.agent.runner import NativeRunner
from bicameral.context.compaction import Compactor
from bicameral.context.extraction import FactExtractor
from bicameral.context.memory import prompt_note, task_reach
from bicameral.events import OwnerId
from bicameral.failures import failure_sentence, stopped_task
from bicameral.models.base import MESSAGES, Message, TextBlock, ToolCall
from bicameral.sandbox.artifacts import SendLimits
from bicameral.store import Stores
from bicameral.tasks.brief import no_direct_messages, task_brief, task_images, task_outgoing
from bicameral.tasks.executor import Executor, TaskControl, acting_for
from bicameral.tasks.task import NOTHING_TO_REPORT, Task, TaskOutcome
from bicameral.tools.base import ToolContext

_MAX_NOTE_ROUNDS = 3


@dataclass(frozen=True)
class BackConfig:
    """What the native executor is given: the owner, where files live and how many a task may send, how much
    memory a brief carries, and the transcript size past which a task's older steps are summarised."""

    owner_id: OwnerId
    data_dir: Path
    sending: SendLimits
    memory_inject_tokens: int
    task_compact_tokens: int


class NativeExecutor(Executor):
    """The bus's Executor as a NativeRunner over the back model and tools."""

    def __init__(self, config: BackConfig, stores: Stores, runner: NativeRunner) -> None:
        self._config = config
        self._stores = stores
        self._runner = runner
        self._system = prompts.load("back.md")
        extractor = FactExtractor(runner.model, stores.memory)
        self._compactor = Compactor(runner.model, extractor, budget_tokens=config.task_compact_tokens)

    async def run(self, task: Task, control: TaskControl) -> TaskOutcome:
        saved = control.resume_messages()
        reach = task_reach(self._stores, task.chat, task.origin_message, self._config.owner_id, task.authority)
        if saved:
            messages = MESSAGES.validate_python(saved)
        else:
            about = f"{task.spec}\n{task.context}"
            remembered = await prompt_note(self._stores, reach, task.chat, about, self._config.memory_inject_tokens)
            brief = TextBlock(text="\n\n".join(filter(None, [remembered, task_brief(task)])))
            messages = [Message(role="user", content=[brief, *task_images(task)])]
        ctx = ToolContext(
            chat=task.chat,
            turn_id=task.id,
            data_dir=self._config.data_dir,
            perform=no_direct_messages,
            stores=self._stores,
            authority=acting_for(task, legacy_owner=reach is not None and reach.owner),
            reach=reach,
            outgoing=task_outgoing(
                task, control, max_files=self._config.sending.max_files, max_bytes=self._config.sending.max_bytes
            ),
            hold_files=True,
        )

        async def on_tool(call: ToolCall) -> None:
            await control.progress(call.summary())

        def on_step(transcript: list[Message]) -> None:
            control.checkpoint(MESSAGES.dump_python(transcript, mode="json"))

        async def compact(transcript: list[Message]) -> list[Message]:
            # The brief (with the memory note) stays verbatim: it is what the task is for.
            return await self._compactor.compact(transcript, reach, pinned=1)

        def drain() -> str | None:
            notes = control.drain_notes()
            if not notes:
                return None
            # Someone's added words ride from this step on: so do their (possibly lower) rights.
            ctx.authority = control.authority() or ctx.authority
            return "\n".join(notes)

        for _ in range(_MAX_NOTE_ROUNDS):
            messages = _with_note(messages, drain())
            result = await self._runner.run(self._system, messages, ctx, drain, on_tool=on_tool, on_step=on_step, compact=compact)
            if result.error is not None:
                return TaskOutcome(
                    error_kind=result.error.kind,
                    error=failure_sentence(result.error.kind),
                    retryable=result.error.retryable,
                )
            control.checkpoint(MESSAGES.dump_python(result.messages, mode="json"))
            late = drain()
            if late is None:
                break
            # Context that arrived after the last tool step must still shape the answer.
            messages = result.messages + [Message.user(late)]
        if result.stop_reason:
            partial = f"{result.text}\n\n" if result.text else ""
            return TaskOutcome(result=partial or None, error_kind="stopped", error=stopped_task(result.stop_reason))
        return TaskOutcome(result=result.text or NOTHING_TO_REPORT)


def _with_note(messages: list[Message], note: str | None) -> list[Message]:
    """Add user notes to the transcript, merged into a trailing user message to keep alternation."""
    if not note:
        return messages
    if messages and messages[-1].role == "user":
        last = messages[-1]
        return messages[:-1] + [Message(role="user", content=[*last.content, TextBlock(text=note)])]
    return messages + [Message.user(note)]
