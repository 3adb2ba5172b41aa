"""Single mode: one model talks and works in one loop."""

from bicameral.single.chamber import SingleChamber, SingleConfig

__all__ = ["SingleChamber", "SingleConfig"]
