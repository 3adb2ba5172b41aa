"""What the dashboard's pages read, each handed over by the app as the stores and the console read it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bicameral.console.audit import AuditSources
from bicameral.store.schedules import Schedule
from bicameral.store.skills import Skill
from bicameral.store.usage import UsageTotal


def _no_usage(since: float, until: float) -> list[UsageTotal]:
    return []


@dataclass(frozen=True)
class Sources:
    schedules: Callable[[], Sequence[Schedule]] = tuple
    memory_changed: Callable[[], None] = lambda: None  # the memory index catches up with an edited file
    usage: Callable[[float, float], list[UsageTotal]] = _no_usage  # per model and chat, from `since` to `until`
    prices_path: Path | None = None
    skills: Callable[[], Sequence[Skill]] = tuple
    plugins_path: Path | None = None
    audit: Callable[[], AuditSources | None] = lambda: None  # /audit's own sources, once the console is built
