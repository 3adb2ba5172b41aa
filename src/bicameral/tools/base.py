"""The tool contract: a name, a description, a pydantic args model and `run(args, ctx)`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from bicameral.events import Action, ActionResult, Authority, Role
from bicameral.sandbox.artifacts import Outgoing

if TYPE_CHECKING:
    from bicameral.store import Stores
    from bicameral.store.memory_scopes import Reach


ArgsT = TypeVar("ArgsT", bound=BaseModel)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class ToolContext:
    """What a tool may touch: the current chat, the outbound port, the data dir, the stores and the clock."""

    # Only the few values tools use, never the whole Settings (it carries every secret).
    chat: str
    turn_id: str
    data_dir: Path
    perform: Callable[[Action], Awaitable[ActionResult]]
    stores: Stores | None = None
    now: Callable[[], datetime] = _utcnow
    message_ids: tuple[str, ...] = ()
    # Whose words this run carries out: the least role among them decides what it may do.
    authority: Authority = field(default_factory=lambda: Authority(Role.MEMBER))
    sent_message_ids: list[str] = field(default_factory=list)
    # The memory this conversation may use (see store/memory_scopes.py); None: no memory at all.
    reach: Reach | None = None
    # Texts of facts forgotten during this run: the agent loop blanks them out of its transcript.
    forgotten: list[str] = field(default_factory=list)
    # Files chosen with `send_file` (checked, capped, snapshotted); a back task holds them for its result,
    # anything else sends each one at once.
    outgoing: Outgoing = field(default_factory=Outgoing)
    hold_files: bool = False

    @property
    def is_owner(self) -> bool:
        return self.authority.is_owner


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=message, is_error=True)


class Tool(Generic[ArgsT]):
    """Subclass in any module under `bicameral/tools/` (as `Tool[ItsArgs]`) and it is registered."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    args_model: ClassVar[type[BaseModel]]
    # Tools that speak to the user directly; the front chamber owns these in bicameral mode.
    messaging: ClassVar[bool] = False
    # What the tool can reach beyond the chat; either makes it owner-only unless the class says otherwise.
    reads_files: ClassVar[bool] = False
    runs_programs: ClassVar[bool] = False
    # Offered to and run for the owner's turns only (the registry enforces it). Declare it on the class to
    # override the default; a subclass that does not declare it gets the default from its own flags.
    owner_only: ClassVar[bool] = False
    # Waits for a person (ask_user): it keeps its own deadline, and the registry's tool timeout does not cut it short.
    waits_for_people: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "owner_only" not in cls.__dict__:
            cls.owner_only = cls.reads_files or cls.runs_programs

    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolResult:  # pragma: no cover - abstract
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the tool keeps between calls (child processes, connections); called once at shutdown."""
