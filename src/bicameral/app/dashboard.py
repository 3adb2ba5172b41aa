"""The web dashboard, built only when BICAMERAL_DASHBOARD_PORT is set (its web stack is imported only then)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from bicameral.config import Settings
from bicameral.store import Stores
from bicameral.types import Clock

if TYPE_CHECKING:
    from bicameral.dashboard import Dashboard


def dashboard_for(settings: Settings, stores: Stores, clock: Clock) -> Dashboard | None:
    """The dashboard when it is enabled: it reads the stores' schedules and redacts what it shows."""
    if settings.dashboard_port is None:
        return None
    from bicameral.dashboard import Dashboard, DashboardConfig

    config = DashboardConfig(settings.dashboard_host, settings.dashboard_port, settings.bot_name, settings.data_dir / "memory")
    return Dashboard(config, stores.redact, schedules=lambda: stores.schedules.due(math.inf), clock=clock)
