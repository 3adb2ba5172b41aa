"""Circuit breakers for the agent loop: a repeated call, consecutive errors, an error window."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from bicameral.types import Clock


@dataclass
class Breakers:
    """Decides when a turn must stop spinning; `tripped` holds the reason once it has."""

    max_errors: int = 3
    window_seconds: float = 60.0
    clock: Clock = time.monotonic
    tripped: str | None = None
    _last_call: str | None = field(default=None, repr=False)
    _consecutive_errors: int = field(default=0, repr=False)
    _first_error_at: float | None = field(default=None, repr=False)

    def before_call(self, name: str, args: dict[str, Any]) -> str | None:
        """Refuse a call identical to the one just made: the model is going in circles."""
        signature = name + json.dumps(args, sort_keys=True, default=str)
        if signature == self._last_call:
            self.tripped = f"the same {name} call was repeated"
            return self.tripped
        self._last_call = signature
        return None

    def after_call(self, name: str, is_error: bool) -> str | None:
        if not is_error:
            self._consecutive_errors = 0
            return None
        now = self.clock()
        self._consecutive_errors += 1
        if self._first_error_at is None:
            self._first_error_at = now
        if self._consecutive_errors >= self.max_errors:
            self.tripped = f"{self._consecutive_errors} tool errors in a row (last from {name})"
        elif now - self._first_error_at > self.window_seconds:
            self.tripped = f"tools kept failing for over {self.window_seconds:.0f}s (last from {name})"
        return self.tripped
