"""The web dashboard, built only when BICAMERAL_DASHBOARD_PORT is set (its web stack is imported only then)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from bicameral.config import Settings
from bicameral.store import Stores
from bicameral.store.usage import UsageTotal
from bicameral.types import Clock

if TYPE_CHECKING:
    from bicameral.dashboard import Dashboard


def dashboard_for(settings: Settings, stores: Stores, clock: Clock) -> Dashboard | None:
    """The dashboard when it is enabled: it reads the stores (schedules, memory files, usage, skills), the prices
    and plugins files, and redacts what it shows; /audit's sources are handed to it once the console is built."""
    if settings.dashboard_port is None:
        return None
    from bicameral.dashboard import Dashboard, DashboardConfig, Sources

    def usage(since: float, until: float) -> list[UsageTotal]:
        return stores.usage.totals(since, group_by=("model", "chat"), until=until)

    config = DashboardConfig(settings.dashboard_host, settings.dashboard_port, settings.bot_name, stores.memory.root)
    sources = Sources(
        schedules=lambda: stores.schedules.due(math.inf), memory_changed=stores.memory.sync, usage=usage,
        prices_path=settings.resolved_prices_path, skills=stores.skills.all, plugins_path=settings.resolved_plugins_path,
    )
    return Dashboard(config, stores.redact, sources=sources, clock=clock)
