"""The owner's console and its commands, each given what it reads or changes."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bicameral.app.configs import owners
from bicameral.backup import last_backup
from bicameral.config import Settings
from bicameral.console.access import access_commands
from bicameral.console.audit import AuditSources, audit_command
from bicameral.console.caps import caps_text
from bicameral.console.control import control_commands
from bicameral.console.desk import Console, OwnerCommand
from bicameral.console.health import HealthSources, health_command
from bicameral.console.logs import LogSource, logs_command
from bicameral.console.model_choice import ModelSetup, model_command
from bicameral.console.times import ago
from bicameral.console.usage import UsageSources, usage_commands
from bicameral.events import Inbound
from bicameral.gate.access import AccessPolicy
from bicameral.gate.pairing import Pairing
from bicameral.models import unavailable
from bicameral.store import Stores
from bicameral.tasks.store import TaskStore
from bicameral.types import Clock, Perform

from .configs import ReportConfig, model_config, report_config
from .models import AppModels


@dataclass(frozen=True)
class Reports:
    """What /health, /audit and /logs read."""

    health: HealthSources
    audit: AuditSources
    logs: LogSource


def reports(
    config: ReportConfig,
    stores: Stores,
    tasks: TaskStore,
    *,
    paused: Callable[[], bool],
    started_at: float,
    clock: Clock,
    left_out: Sequence[str],
    model_status: Callable[[], Sequence[str]] | None = None,
    problems: Callable[[], Sequence[str]] = lambda: (),
) -> Reports:
    """The reports' sources: the stores, the data dir and the log, what was left out at start, and one line per
    configured model (`model_status`; without it, each model says no call was recorded)."""
    not_loaded = list(left_out)
    if config.unread_plugins is not None:
        not_loaded.append(
            f"{config.unread_plugins}: only ask_before, mcps and skills_disabled apply (the rest is the Claude Code executor's)"
        )
    unrecorded = [f"{ref} ({parts}): no call recorded yet" for ref, parts in config.models.items()]
    return Reports(
        health=HealthSources(
            stores.messages, stores.outbox, tasks, stores.schedules, config.data_dir, started_at, paused,
            model_status=model_status or (lambda: unrecorded), clock=clock,
        ),
        audit=AuditSources(
            stores.tool_calls, stores.unauthorized, lambda: [*not_loaded, *stores.skills.problems(), *problems()],
            last_backup=functools.partial(last_backup, config.data_dir), redact=stores.redact, clock=clock,
        ),
        logs=LogSource(config.log_file, stores.redact),
    )


def owner_commands(
    console: Console,
    *,
    stop: Callable[[int], None],
    access: AccessPolicy,
    pairing: Pairing,
    reports: Reports,
) -> list[OwnerCommand]:
    """Every owner command, in the order /help lists them."""
    return [
        *control_commands(console, stop), *access_commands(access, pairing),
        health_command(reports.health), audit_command(reports.audit), logs_command(reports.logs),
    ]


def metering_commands(usage: UsageSources, models: ModelSetup) -> list[OwnerCommand]:
    """/usage, /cost and /model: what the models used and cost, and which models run."""
    return [*usage_commands(usage), model_command(models)]


def build_console(
    settings: Settings,
    mode: str,
    stores: Stores,
    tasks: TaskStore,
    models: AppModels,
    *,
    forward: Callable[[Inbound], Awaitable[None]],
    send: Perform,
    access: AccessPolicy,
    pairing: Pairing,
    stop: Callable[[int], None],
    started_at: float,
    left_out: Sequence[str],
    clock: Clock,
    problems: Callable[[], Sequence[str]] = lambda: (),
    audit_to: Callable[[AuditSources], None] = lambda audit: None,
) -> Console:
    """The console with every owner command, handing everything else on to `forward`; `audit_to` gets /audit's
    sources (the dashboard's pages read the same)."""
    console = Console(
        (), owner_id=owners(settings), bot_name=settings.bot_name, forward=forward, send=send, messages=stores.messages,
        kv=stores.kv,
    )
    told = report_config(settings, mode)  # /health: each configured model's last outcome, from the meter
    shown = reports(
        told, stores, tasks, paused=lambda: console.paused, started_at=started_at, clock=clock, left_out=left_out,
        model_status=lambda: models.meter.outcomes.lines(clock(), list(told.models), ago), problems=problems,
    )
    console.add(owner_commands(console, stop=stop, access=access, pairing=pairing, reports=shown))
    audit_to(shown.audit)
    cli_note = "The Claude Code CLI's own model calls are not counted here." if settings.back.provider == "claude-code" else None
    console.add(metering_commands(
        UsageSources(
            models.usage_totals, settings.resolved_prices_path, clock=clock, note=cli_note,
            caps=functools.partial(caps_text, models.caps),
        ),
        ModelSetup(models.choices, mode, settings.front_model, settings.back_model,
                   functools.partial(unavailable, config=model_config(settings))),
    ))
    return console
