"""`App`: build the stores, chambers and channels from the settings; start and stop them in order."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from bicameral.agent.subagent import SubAgentRunner
from bicameral.app.backups import Running
from bicameral.app.chambers import build_handler
from bicameral.app.commands import load_beside, offered, owner_made_commands
from bicameral.app.configs import (
    gate_config,
    lane_config,
    media_intake,
    owner_chat,
    owners,
    tools_for,
    web_fetch_tool,
    web_search_tool,
)
from bicameral.app.console import build_console
from bicameral.app.dashboard import dashboard_for
from bicameral.app.data import keep_reserve, open_stores, prune_outgoing, prune_sent
from bicameral.app.models import AppModels
from bicameral.app.workers import Wakeups, dispatcher, local_work, shared_turns
from bicameral.channels.base import Channel, SendsAlone
from bicameral.config import Settings
from bicameral.console.caps import CapDesk
from bicameral.delivery.outbox import Outbox
from bicameral.delivery.router import ActionRouter
from bicameral.events import SendText
from bicameral.failures import failure_sentence
from bicameral.front.chamber import FrontChamber
from bicameral.gate.access import AccessPolicy
from bicameral.gate.gate import Gate
from bicameral.gate.pairing import Pairing
from bicameral.gate.ratelimit import RateLimiter
from bicameral.mcp.plugins import load_plugins
from bicameral.models.base import Model
from bicameral.sandbox.artifacts import discard
from bicameral.scheduler import FireDelivery, Scheduler, seed_reflection
from bicameral.store.approvals import ApprovalStore
from bicameral.store.questions import QuestionStore
from bicameral.store.schedules import SchedulePolicy
from bicameral.tasks.store import TaskStore
from bicameral.tools.approvals import Approvals, AskBefore
from bicameral.tools.ask import AskUser, Questions
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.registry import ToolRegistry
from bicameral.tools.subagent import SubAgent
from bicameral.turns.lanes import Conversation
from bicameral.types import Clock

log = logging.getLogger(__name__)

# Allocations between young-generation collections once running (Python's default: 700).
YOUNG_COLLECTION_THRESHOLD = 10_000


class App:
    """The running assistant. `start` opens the stores and builds everything; `stop` undoes it in reverse.

    Use it as `async with App(...) as app:` or call `start`/`stop` yourself.
    """

    def __init__(
        self,
        settings: Settings,
        channels: Sequence[Channel],
        *,
        back_model: Model | None = None,
        front_model: Model | None = None,
        extra_tools: Sequence[Tool[Any]] = (),
        clock: Clock = time.time,
        helper: bool = False,  # another worker receives: this one runs the turns of the chats it takes
    ) -> None:
        self.settings = settings
        self.helper = helper
        self.channels = list(channels)
        self.mode = settings.effective_mode
        self.exit_code = 0
        self._given_models = (back_model, front_model)
        self._extra_tools = tuple(extra_tools)
        self._clock = clock
        self._stop_requested = asyncio.Event()
        self._finishing: asyncio.Task[None] | None = None
        self._started = False
        self._stopped = False
        self._sub_agent: SubAgentRunner | None = None
        self._notices: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> App:
        try:
            await self.start()
        except BaseException:
            await self.stop()  # release what a half-finished start opened
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open the stores, build the chamber, start it and every channel, then replay pending messages."""
        settings = self.settings
        started_at = self._clock()  # /health's uptime counts from here
        # First of all: a second assistant on this data dir stops here, before the database. Also the lock restore
        # checks, and the nightly backups.
        self.held = Running(settings, self._clock, nightly=not self.helper)
        self._started = True
        self.stores = open_stores(settings)
        if self.helper:  # it sends where it can without receiving (Telegram); the serving worker has the rest
            self.channels = [channel for channel in self.channels if isinstance(channel, SendsAlone)]
        self.models = AppModels(settings, self.mode, self.stores, self._clock)
        keep_reserve(settings, self.stores, on_low=self._disk_low)
        self.tasks = TaskStore(self.stores.db, redact=self.stores.redact)
        self.router = ActionRouter(self.stores.messages)
        self.dashboard = None if self.helper else dashboard_for(settings, self.stores, self._clock)  # a channel too
        self.channels += [self.dashboard.channel] if self.dashboard is not None else []
        for channel in self.channels:
            self.router.register(channel)
        # With PostgreSQL, each chat's work is leased to one worker: a late worker's results are fenced off.
        self.sharing = shared_turns(settings, self.stores, self.channels, self._clock)
        self.outbox = Outbox(
            self.stores.outbox,
            self.router,
            retry_base=settings.send_retry_base_seconds,
            retry_cap=settings.send_retry_cap_seconds,
            give_up_after=settings.send_give_up_seconds,
            release=functools.partial(discard, settings.data_dir),
            worker=self.sharing.worker if self.sharing is not None else None,
            fence=self.sharing.fence if self.sharing is not None else None,
            claim_seconds=settings.chat_lease_seconds,  # renewed while the worker lives (a third of it at a time)
        )
        if not self.helper:
            prune_outgoing(settings, self.stores, self.tasks, self._clock())
            prune_sent(settings, self.stores, self._clock())  # after the files: their lookup reads these rows
        # ask_user's questions: answers are taken out between the gate and the console.
        self.questions = Questions(
            QuestionStore(self.stores.db), self.stores.messages, self.outbox.perform,
            timeout=settings.ask_timeout_seconds, clock=self._clock,
        )
        # The owner's approvals of tool calls (plugins.json's ask_before, untrusted content): presses taken out next.
        self.approvals = Approvals(
            ApprovalStore(self.stores.db), self.stores.messages, self.outbox.perform, owner_id=owners(settings),
            ask_before=AskBefore(load_plugins(settings.resolved_plugins_path).ask_before),
            timeout=settings.approval_timeout_seconds, redact=self.stores.redact, clock=self._clock, channels=self.channels,
        )
        self.stores.skills.hide(load_plugins(settings.resolved_plugins_path).skills_disabled)  # in every mode
        # A later tool of the same name replaces an earlier one: the web tools get their limits, tests their fakes.
        web: list[Tool[Any]] = [web_fetch_tool(settings), web_search_tool(settings)]
        # sub_agent runs a native loop on the back model; the Claude Code executor has no such model to lend it.
        no_sub_agent = ("sub_agent",) if settings.back.provider == "claude-code" else ()
        left_out: list[str] = []  # tools that could not be offered, and why: /audit shows them
        # The owner's own commands (<data>/commands): the tools that change them, and each one offered as a tool.
        self.commands, changing = owner_made_commands(settings)
        self.registry = ToolRegistry(
            [*await tools_for(settings, left_out), *web, SubAgent(self._delegate), AskUser(self.questions), *changing,
             *self._extra_tools],
            audit=self.stores.tool_calls,
            disabled=no_sub_agent,
            timeout=settings.tool_timeout_seconds,
            approver=self.approvals,
            dynamic=functools.partial(offered, self.commands),
        )
        self.handler, self._sub_agent = build_handler(
            settings, self.mode, self.stores, self.models, self._given_models, self.registry, self.tasks, self.outbox,
            self.channels, on_fatal=self.fail, clock=self._clock,
        )
        two_chambers = self.mode == "bicameral"
        self.media = media_intake(settings, self.stores.messages)
        self.conversation = Conversation(
            lane_config(settings),
            self.handler,
            self.outbox,
            self.stores.messages,
            lanes_per_user_in_groups=two_chambers,
            typing_in_groups=not two_chambers,
            stores=self.stores,
            media=self.media,
            commands=self.commands,
        )
        # Spending caps: what a cap stops waits between the console and the lanes, and the owner is asked.
        self.caps = CapDesk(
            self.models.caps, self.stores.caps, self.stores.messages, forward=self.conversation.submit,
            send=self.outbox.perform, owner_id=owners(settings), clock=self._clock,
            owner_chat=owner_chat(settings, self.channels),
        )
        self.conversation.on_capped = self.caps.hold_refused
        access = AccessPolicy(settings.resolved_access_path, owners(settings))
        pairing = Pairing(self.stores.pairing, access, owner_id=owners(settings), clock=self._clock)
        self.console = build_console(
            settings, self.mode, self.stores, self.tasks, self.models, forward=self.caps.forward,
            send=self.outbox.perform, access=access, pairing=pairing, stop=self.stop_with, started_at=started_at,
            left_out=left_out, clock=self._clock, problems=self.commands.problems,
            audit_to=self.dashboard.show_audit if self.dashboard is not None else lambda audit: None,
        )
        if self.dashboard is not None:
            await self.dashboard.start()
            self.dashboard.attach(self.console)
        await load_beside(self.commands, self.console)
        # What the gate hands stored messages to, and what a restart replays through: presses and answers taken
        # out by the steps they belong to (questions, approvals, caps), the rest to the console.
        intake = self.questions.sieve(self.approvals.sieve(self.caps.sieve(self.console.submit)))
        limiter = RateLimiter(self.stores.ratelimits, settings.rate_limit_per_min, clock=self._clock)
        if self.sharing is not None:  # the gate signals each message's chat; the worker that takes it answers it
            self.sharing.attach(local_work(intake, self.conversation, self.handler, self.caps, self.console, self.outbox))
            self.conversation.on_idle = self.sharing.wake
        self.gate = Gate(
            replace(gate_config(settings), owner_commands=self.console.names), access, self.stores, self.router,
            dispatcher(self.sharing, self.router) if self.sharing is not None else intake, limiter,
            awaited=self.questions.awaits,
            clock=self._clock, send=self.outbox.perform, pairing=pairing,
        )

        await self.handler.start()
        for channel in self.channels:
            if isinstance(channel, SendsAlone) and self.helper:
                await channel.start_sending()
                continue
            await channel.start(self.gate, self._channel_ended)
            log.info("channel %s ready", channel.name)
            self._in_background(channel.show_commands(self.console.menu()))
        await self.outbox.start()  # first delivers what the previous process left unsent
        if self.sharing is None:
            await self.conversation.recover(intake)
        else:  # what waits, and what a stopped worker left, is taken chat by chat
            self.wakeups = Wakeups(settings, self.sharing)
            await self.sharing.start()
        if not self.helper:
            self.scheduler = self._build_scheduler()
            await self.scheduler.start()
        # Everything imported so far lives for the whole run: keep it out of full collections,
        # which otherwise stall a turn for ~150 ms now and then.
        gc.freeze()
        # A turn makes thousands of short-lived objects, nearly all freed by reference counting; at
        # Python's default of 700 the young generation was collected several times a turn for nothing.
        gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
        log.info("ready (mode=%s, back=%s, front=%s)", self.mode, settings.back_model, settings.front_model)

    def _build_scheduler(self) -> Scheduler:
        """Reminders go out through the outbox; scheduled tasks enter the conversation like messages."""
        settings = self.settings
        self.stores.schedules.policy = SchedulePolicy(
            default_tz=settings.timezone,
            per_user=settings.schedules_per_user,
            min_interval_seconds=settings.schedule_min_interval_seconds,
        )
        seed_reflection(
            self.stores.schedules, enabled=settings.self_reflection, owner_chat=owner_chat(settings, self.channels),
            cron=settings.self_reflection_cron, now=self._clock(),
        )
        # Through the outbox: once a reminder is recorded there, its delivery survives retries and restarts.
        delivery = FireDelivery(  # a scheduled task is a message: with workers, its chat's holder answers it
            self.outbox.perform, self.stores.messages,
            self.sharing.dispatch if self.sharing is not None else self.conversation.submit,
            followup_stale_after_seconds=settings.away_after_seconds, skills=self.stores.skills,
            delivered=lambda fire: self.stores.schedules.delivered(fire.id, self._clock()),
        )
        return Scheduler(self.stores.schedules, delivery, clock=self._clock)

    async def _delegate(self, task: str, ctx: ToolContext) -> ToolResult:
        """The sub_agent tool's loop, on the back model once the chamber has built it."""
        if self._sub_agent is None:
            return ToolResult.error("sub_agent is not available with this executor; do the task yourself")
        return await self._sub_agent(task, ctx)

    def _disk_low(self) -> None:
        """The data disk ran short (the database got the reserve): the owner hears it once, until there is room."""
        chat = owner_chat(self.settings, self.channels)
        if chat is None or not hasattr(self, "outbox"):
            return
        notice = SendText(chat=chat, text=failure_sentence("disk_full"))
        self._in_background(self.outbox.perform(notice))

    def _in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    def request_stop(self) -> None:
        self._stop_requested.set()

    def stop_with(self, exit_code: int) -> None:
        """Stop cleanly and exit with this status (the owner's /kill)."""
        log.warning("stopping at the owner's request (exit status %d)", exit_code)
        self.exit_code = exit_code
        self.request_stop()

    def fail(self, reason: str) -> None:
        """Stop with a failure status (a channel that cannot go on, an executor that gave up); exit 1."""
        log.critical("stopping: %s", reason)
        self.exit_code = 1
        self.request_stop()

    def _channel_ended(self, reason: str | None) -> None:
        """A channel stopped receiving: a failure stops the app with status 1, a clean end with 0."""
        if reason is None:
            # The input ended (piped text, Ctrl-D): answer what already came in, then stop.
            self._finishing = asyncio.create_task(self._finish_then_stop())
        else:
            self.fail(reason)

    async def _finish_then_stop(self) -> None:
        try:
            await self.conversation.finish()
            if isinstance(self.handler, FrontChamber):  # the answer may still be coming from a task
                await self.handler.finish()
            await self.outbox.flush()
        finally:
            self.request_stop()

    async def wait(self) -> None:
        await self._stop_requested.wait()

    async def stop(self) -> None:
        """Stop channels, turns, the chamber and the models, then close the stores; safe to call twice."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        if hasattr(self, "scheduler"):
            await self.scheduler.stop()  # first: fires under way still have their channels
        if hasattr(self, "wakeups"):
            await self.wakeups.close()
        if (sharing := getattr(self, "sharing", None)) is not None:
            await sharing.stop()  # its chats go to other workers now; what is late here is fenced off
        if (dashboard := getattr(self, "dashboard", None)) is not None:
            await dashboard.stop()
        if self._finishing is not None:
            self._finishing.cancel()
        if hasattr(self, "outbox"):
            await self.outbox.stop()  # before the channels: sends under way end, not cut (cut, they would go twice)
        for channel in self.channels:
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", channel.name)
        if hasattr(self, "gate"):
            await self.gate.close()
        if hasattr(self, "console"):
            await self.console.close()
        if hasattr(self, "caps"):
            await self.caps.close()
        if hasattr(self, "conversation"):
            await self.conversation.close()
        if hasattr(self, "handler"):
            await self.handler.stop()
        if hasattr(self, "media"):
            await self.media.aclose()
        if hasattr(self, "registry"):
            await self.registry.aclose()
        if hasattr(self, "models"):
            await self.models.aclose()
        if hasattr(self, "held"):
            await self.held.close()
        if hasattr(self, "stores"):  # a start refused before the database opened has nothing more to stop
            self.stores.close()
            log.info("stopped")
