"""Single mode: one model runs the whole turn (talks and works), its session persisted per chat."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from pathlib import Path

from bicameral import prompts
from bicameral.agent.runner import NativeRunner, RunResult
from bicameral.agent.session import prepare_for_storage
from bicameral.context.compaction import Compactor
from bicameral.context.envelope import content_blocks, envelope
from bicameral.context.extraction import FactExtractor
from bicameral.context.memory import memory_blocks, without_memory
from bicameral.delivery.drafts import Drafting, DraftStream
from bicameral.delivery.progress import ProgressNote
from bicameral.events import Authority, OwnerId, SendText
from bicameral.failures import failure_sentence, stopped_turn
from bicameral.markup import quoteattr
from bicameral.models.base import MESSAGES, Message, ToolCall
from bicameral.models.metered import CAP
from bicameral.models.scope import gave_up_on_cap
from bicameral.sandbox.artifacts import SendLimits
from bicameral.scheduler.retry import FireRetry, gave_up, scheduled_task
from bicameral.store import Stores
from bicameral.turns.turn import Turn
from bicameral.types import Sleep

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SingleConfig:
    """What single mode is given: who the bot and its owner are, where files live and how many a turn may send,
    how much memory a prompt carries, when the progress note shows, how a session is kept, how a scheduled
    task's run is retried."""

    bot_name: str
    owner_id: OwnerId
    data_dir: Path
    sending: SendLimits
    memory_inject_tokens: int
    memory_extraction: bool
    progress_note_after_seconds: float
    session_compact_tokens: int
    max_session_messages: int
    scheduled_retry: FireRetry


class SingleChamber:
    """The TurnHandler for `single` mode."""

    def __init__(self, config: SingleConfig, stores: Stores, runner: NativeRunner, *, sleep: Sleep = asyncio.sleep) -> None:
        self._config = config
        self._stores = stores
        self._runner = runner
        self._sleep = sleep
        self._retry = config.scheduled_retry
        self._template = prompts.load("single.md")
        extractor = FactExtractor(runner.model, stores.memory)
        self._extractor = extractor if config.memory_extraction else None
        self._compactor = Compactor(runner.model, extractor, budget_tokens=config.session_compact_tokens)

    def system_prompt(self, turn: Turn) -> str:
        first = turn.batch[0]
        # Names and titles are quoted as values: a name with line breaks or instructions stays a name.
        if first.is_private:
            kind = f"a private chat with {quoteattr(first.sender.name)}"
        else:
            kind = f"the group {quoteattr(first.chat_title or first.chat)}"
        return self._template.format(bot_name=self._config.bot_name, chat_kind=kind)

    async def start(self) -> None:
        """Nothing to acquire: the model client connects lazily."""

    async def stop(self) -> None:
        """Cancel fact extraction still running; the app closes the models it built."""
        if self._extractor is not None:
            await self._extractor.close()

    def reset(self, chat: str) -> None:
        self._stores.sessions.clear(chat)

    async def interrupt(self, chat: str, by: Authority | None = None) -> bool:
        return False  # all single-mode work lives inside the turn, which the conversation cancels

    async def handle(self, turn: Turn) -> None:
        # The last model call's text is the reply: it shows while it is written where the channel shows drafts.
        async with DraftStream(turn.perform, turn.chat, turn.turn_id) as draft:
            await self._answer(turn, draft)

    async def _answer(self, turn: Turn, draft: DraftStream) -> None:
        runner = replace(self._runner, model=Drafting(self._runner.model, draft, final_only=True))
        ctx = turn.tool_context(self._stores, self._config.data_dir, self._config.sending)
        progress = ProgressNote(
            turn.perform, turn.chat, after=self._config.progress_note_after_seconds, thread_id=turn.thread_id
        )
        progress.start()
        transcript: list[Message] = []
        try:
            history = await self._compactor.compact(
                MESSAGES.validate_python(self._stores.sessions.load(turn.chat)), ctx.reach
            )
            remembered = await memory_blocks(self._stores, ctx.reach, turn.batch, self._config.memory_inject_tokens)
            user = Message(role="user", content=[*remembered, *content_blocks(turn.batch, self._config.owner_id)])
            transcript = history + [user]

            async def on_tool(call: ToolCall) -> None:
                await progress.step(call.summary())

            async def attempt(failed: RunResult | None) -> RunResult:
                # A retry builds on the failed run's transcript: tool steps it finished are not repeated.
                messages = failed.messages if failed is not None else transcript
                def drain() -> str | None:
                    return envelope(turn.drain_injected(), self._config.owner_id) or None

                return await runner.run(self.system_prompt(turn), messages, ctx, drain, on_tool=on_tool)

            schedule_id = scheduled_task(turn.batch)
            if schedule_id is None:
                result, tries = await attempt(None), 1
            else:
                result, tries = await self._retry.run(
                    attempt, lambda r: r.error is not None and r.error.kind != CAP, sleep=self._sleep
                )
        except BaseException:
            if transcript:
                self._save(turn.chat, transcript + [Message.assistant("(the turn was interrupted)")])
            raise
        finally:
            await draft.settle()  # nothing more of the draft: the reply takes its place
            await progress.close()
        if result.error is not None:
            reply = failure_sentence(result.error.kind)
            if result.error.kind == CAP:
                gave_up_on_cap()
            if schedule_id is not None:
                reply = gave_up(schedule_id, reply, tries, self._stores.schedules)
            self._save(turn.chat, transcript + [Message.assistant(f"(could not answer: {result.error.kind})")])
        else:
            reply = result.text
            if result.stop_reason:
                reply = (reply + "\n\n" if reply else "") + stopped_turn(result.stop_reason)
            self._save(turn.chat, result.messages)
        if reply:
            await turn.send_answer(SendText(chat=turn.chat, text=reply, reply_to=turn.reply_anchor, thread_id=turn.thread_id,
                                            draft=draft.key if result.error is None else None))
        elif not ctx.sent_message_ids:
            log.warning("turn %s in %s ended with no text and sent nothing", turn.turn_id, turn.chat)
        if self._extractor is not None and result.error is None:
            self._extractor.schedule(ctx.reach, turn.batch, reply)  # after the reply is out: never delays it

    def record(self, turn: Turn, reply: str) -> None:
        """Keep an exchange answered without the model (the offline triage) in the chat's session, so the model's
        next turn sees it."""
        history = MESSAGES.validate_python(self._stores.sessions.load(turn.chat))
        user = Message(role="user", content=list(content_blocks(turn.batch, self._config.owner_id)))
        self._save(turn.chat, history + [user, Message.assistant(reply)])

    def _save(self, chat: str, messages: list[Message]) -> None:
        stored = prepare_for_storage(without_memory(messages), self._config.max_session_messages)
        self._stores.sessions.save(chat, MESSAGES.dump_python(stored, mode="json"))
