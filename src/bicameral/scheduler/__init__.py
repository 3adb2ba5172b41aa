"""Time: fires schedules at their due time (one timer, no polling) and delivers each fire once."""

from bicameral.scheduler.delivery import FireDelivery
from bicameral.scheduler.reflection import seed_reflection
from bicameral.scheduler.timer import Scheduler

__all__ = ["FireDelivery", "Scheduler", "seed_reflection"]
