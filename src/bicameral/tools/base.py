"""The tool contract: a name, a description, a pydantic args model and `run(args, ctx)`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

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
    # The words of the people this run carries out (a URL in them was asked for), never a forward or a quote.
    words: str = ""
    # What untrusted content this run has read (a fetched page, search hits, a forward), once it has: from then on
    # a tool that acts outside needs the owner's approval (tools/approvals.py). Never cleared within the run.
    tainted_by: str | None = None

    @property
    def is_owner(self) -> bool:
        return self.authority.is_owner

    @property
    def untrusted(self) -> str | None:
        """Why this run cannot be trusted to steer tools that act outside, or None: it read untrusted content, or
        it carries the words of someone other than the owner."""
        if self.tainted_by is not None:
            return self.tainted_by
        return None if self.is_owner else "words from someone other than the owner"


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
    # Acts outside the chat's workspace (another chat, the network): once a run has read untrusted content, a call
    # needs the owner's approval. Every tool says so on its own class (tests/unit/test_approval_rules.py checks).
    acts_outside: ClassVar[bool] = False
    # Its results are untrusted content (a web page, search hits, other people's messages): reading them taints
    # the run (`ToolContext.tainted_by`).
    untrusted_results: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "owner_only" not in cls.__dict__:
            cls.owner_only = cls.reads_files or cls.runs_programs

    def json_schema(self) -> dict[str, Any]:
        """The arguments' JSON Schema as the model is shown it; a plugin's tool gives its server's own."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def reaches_out(self, args: ArgsT, ctx: ToolContext) -> bool:
        """Whether this call acts outside the workspace; a tool whose answer depends on its arguments overrides it."""
        return self.acts_outside

    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolResult:  # pragma: no cover - abstract
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the tool keeps between calls (child processes, connections); called once at shutdown."""


class Approver(Protocol):
    """Asks the owner before a call runs (tools/approvals.py); the registry consults it for every call."""

    async def check(self, tool: Tool[Any], args: BaseModel, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """None: run the call; else the result the model gets instead (denied, or no answer)."""
        ...
