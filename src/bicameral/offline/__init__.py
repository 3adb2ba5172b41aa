"""Offline mode: rules in front of the bundled local model, so it can remember, remind, read a page and recall."""

from bicameral.offline.chamber import OfflineChamber, OfflineConfig

__all__ = ["OfflineChamber", "OfflineConfig"]
