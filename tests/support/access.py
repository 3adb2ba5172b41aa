"""Set the access policy the way the owner does: by writing access.json."""

from __future__ import annotations

import json

from bicameral.config import Settings


def write_access(settings: Settings, **config: object) -> None:
    """Write access.json for these settings (before the app starts, so no reload race)."""
    path = settings.resolved_access_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config), encoding="utf-8")
