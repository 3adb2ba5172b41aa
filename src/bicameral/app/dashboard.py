"""The web dashboard, built only when BICAMERAL_DASHBOARD_PORT is set (its web stack is imported only then)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bicameral.config import Settings
from bicameral.types import Clock

if TYPE_CHECKING:
    from bicameral.dashboard import Dashboard


def dashboard_for(settings: Settings, redact: Callable[[str], str], clock: Clock) -> Dashboard | None:
    if settings.dashboard_port is None:
        return None
    from bicameral.dashboard import Dashboard, DashboardConfig

    config = DashboardConfig(settings.dashboard_host, settings.dashboard_port, settings.bot_name, settings.data_dir / "memory")
    return Dashboard(config, redact, clock=clock)
