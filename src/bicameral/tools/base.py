"""The tool contract: a name, a description, a pydantic args model and `run(args, ctx)`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from bicameral.events import Action, ActionResult

if TYPE_CHECKING:
    from bicameral.config import Settings
    from bicameral.store import Stores
    from bicameral.store.memory_scopes import Reach


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class ToolContext:
    """What a tool may touch: the current chat, the outbound port, the stores and the clock."""

    chat: str
    turn_id: str
    settings: Settings
    perform: Callable[[Action], Awaitable[ActionResult]]
    stores: Stores | None = None
    now: Callable[[], datetime] = _utcnow
    message_ids: tuple[str, ...] = ()
    is_owner: bool = False
    sent_message_ids: list[str] = field(default_factory=list)
    # The memory this conversation may use (see store/memory_scopes.py); None: no memory at all.
    reach: Reach | None = None


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=message, is_error=True)


class Tool:
    """Subclass in any module under `bicameral/tools/` and it is registered."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    args_model: ClassVar[type[BaseModel]]
    # Tools that speak to the user directly; the front chamber owns these in bicameral mode.
    messaging: ClassVar[bool] = False

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:  # pragma: no cover - abstract
        raise NotImplementedError
