"""Single mode: one model talks and works in one loop."""

from bicameral.single.chamber import SingleChamber

__all__ = ["SingleChamber"]
