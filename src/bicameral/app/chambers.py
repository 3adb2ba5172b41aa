"""The chamber that answers turns, chosen by the executor and the mode, built from the settings."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from bicameral.agent.runner import NativeRunner
from bicameral.agent.subagent import SubAgentRunner, restricted_tools
from bicameral.app.configs import (
    back_config,
    claude_code_chamber_config,
    claude_code_config,
    front_config,
    offline_config,
    single_config,
)
from bicameral.app.models import AppModels
from bicameral.back.executor import NativeExecutor
from bicameral.channels.base import Channel
from bicameral.config import Settings
from bicameral.delivery.outbox import Outbox
from bicameral.front.chamber import FrontChamber
from bicameral.models.base import Model
from bicameral.single import SingleChamber
from bicameral.store import Stores
from bicameral.tasks.executor import Executor
from bicameral.tasks.store import TaskStore
from bicameral.tools.registry import ToolRegistry
from bicameral.turns.turn import TurnHandler
from bicameral.types import Clock

log = logging.getLogger(__name__)


def build_handler(
    settings: Settings, mode: str, stores: Stores, models: AppModels, given: tuple[Model | None, Model | None],
    registry: ToolRegistry, tasks: TaskStore, outbox: Outbox, channels: Sequence[Channel], *,
    on_fatal: Callable[[str], None], clock: Clock,
) -> tuple[TurnHandler, SubAgentRunner | None]:
    """The handler, and the sub_agent tool's loop on the back model (None with the Claude Code executor)."""
    if mode != settings.mode:
        log.info("bicameral mode needs models that call tools; the local model runs in single mode")
    if settings.back.provider == "claude-code" and mode == "single":
        from bicameral.claude_code.chamber import ClaudeCodeChamber

        chamber = ClaudeCodeChamber(
            claude_code_config(settings), claude_code_chamber_config(settings), stores, registry, outbox.perform,
            on_fatal=on_fatal,
        )
        return chamber, None
    sub_agent: SubAgentRunner | None = None
    if settings.back.provider == "claude-code":
        from bicameral.claude_code.executor import ClaudeCodeExecutor

        caps = models.caps.refusal_text if models.caps.active else None
        executor: Executor = ClaudeCodeExecutor(claude_code_config(settings), stores, registry, check=caps, channels=channels)
    else:
        back_model = models.for_role(given[0], settings.back_model, "back")
        sub_agent_loop = runner(settings, back_model, restricted_tools(registry))
        sub_agent = SubAgentRunner(replace(sub_agent_loop, max_iterations=settings.sub_agent_max_iterations))
        if mode == "single":
            single = SingleChamber(single_config(settings), stores, runner(settings, back_model, registry))
            if settings.back.provider != "local":
                return single, sub_agent
            # The local model calls no tools: rules in front of it remember, remind, read pages and recall.
            from bicameral.offline import OfflineChamber

            return OfflineChamber(single, registry, stores, offline_config(settings), clock=clock), sub_agent
        back_tools = registry.subset(exclude_messaging=True)
        executor = NativeExecutor(back_config(settings), stores, runner(settings, back_model, back_tools))
    front_model = models.for_role(given[1], settings.front_model, "front")
    front = FrontChamber(front_config(settings), stores, tasks, front_model, executor, outbox,
                         resume_at_start=settings.database_url is None)  # with workers, each resumes the chats it takes
    return front, sub_agent


def runner(settings: Settings, model: Model, tools: ToolRegistry) -> NativeRunner:
    """The native tool loop with the settings' limits."""
    return NativeRunner(
        model,
        tools,
        max_iterations=settings.max_iterations,
        max_tokens=settings.max_tokens,
        max_errors=settings.tool_error_max_count,
        error_window_seconds=settings.tool_error_window_seconds,
    )
