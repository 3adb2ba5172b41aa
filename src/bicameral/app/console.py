"""The owner's commands, each given what it reads or changes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bicameral.console.access import access_commands
from bicameral.console.audit import AuditSources, audit_command
from bicameral.console.control import control_commands
from bicameral.console.desk import Console, OwnerCommand
from bicameral.console.health import HealthSources, health_command
from bicameral.console.logs import LogSource, logs_command
from bicameral.console.model_choice import ModelSetup, model_command
from bicameral.console.usage import UsageSources, usage_commands
from bicameral.gate.access import AccessPolicy
from bicameral.gate.pairing import Pairing
from bicameral.store import Stores
from bicameral.tasks.store import TaskStore
from bicameral.types import Clock


@dataclass(frozen=True)
class Reports:
    """What /health, /audit and /logs read."""

    health: HealthSources
    audit: AuditSources
    logs: LogSource


@dataclass(frozen=True)
class ReportConfig:
    """What the reports are told of the configuration (filled by `app/configs.py`'s `report_config`)."""

    data_dir: Path
    log_file: Path
    models: dict[str, str]  # each model the running mode calls (`provider:model`) → the parts it plays
    unread_plugins: str | None = None  # a plugins.json this mode does not read, by name


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
) -> Reports:
    """The reports' sources: the stores, the data dir and the log, what was left out at start, and one line per
    configured model (`model_status`; without it, each model says no call was recorded)."""
    not_loaded = list(left_out)
    if config.unread_plugins is not None:
        not_loaded.append(f"{config.unread_plugins} is not read: only the Claude Code executor uses it")
    unrecorded = [f"{ref} ({parts}): no call recorded yet" for ref, parts in config.models.items()]
    return Reports(
        health=HealthSources(
            stores.messages, stores.outbox, tasks, stores.schedules, config.data_dir, started_at, paused,
            model_status=model_status or (lambda: unrecorded), clock=clock,
        ),
        audit=AuditSources(stores.tool_calls, stores.unauthorized, lambda: not_loaded, redact=stores.redact, clock=clock),
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
