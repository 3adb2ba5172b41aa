"""The channel-agnostic vocabulary: what comes in (Inbound) and what goes out (Action)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ChatType = Literal["private", "group", "supergroup", "channel"]
InboundKind = Literal["message", "edit", "command", "synthetic"]


def chat_key(channel: str, native_id: object) -> str:
    """The core's name for a chat: `channel:native-id`, unique across channels."""
    return f"{channel}:{native_id}"


def split_chat_key(chat: str) -> tuple[str, str]:
    channel, _, native = chat.partition(":")
    return channel, native


@dataclass(frozen=True)
class Sender:
    id: str
    name: str
    username: str | None = None
    is_bot: bool = False
    is_admin: bool = False  # a group admin, where the channel can tell; may stop others' work and /reset


@dataclass(frozen=True)
class Attachment:
    """A file the channel saved under the data dir; `path` is relative to it."""

    kind: Literal["photo", "document"]
    path: str
    mime: str | None = None
    name: str | None = None
    size: int = 0
    workspace_path: str | None = None  # its copy in the chat's workspace, where the file tools find it


@dataclass(frozen=True)
class AttachmentRef:
    """A file on an inbound message, not downloaded yet: the gate has it fetched only for admitted senders."""

    kind: Literal["photo", "document"]
    file_id: str
    name: str
    size: int = 0
    mime: str | None = None


@dataclass(frozen=True)
class Quoted:
    """The message an inbound replies to: the referent, not the latest context."""

    message_id: str
    sender_name: str
    text: str
    from_bot: bool = False


@dataclass(frozen=True)
class Inbound:
    channel: str
    chat: str
    message_id: str
    sender: Sender
    text: str
    ts: float
    kind: InboundKind = "message"
    chat_type: ChatType = "private"
    chat_title: str | None = None
    reply_to: Quoted | None = None
    attachments: tuple[Attachment, ...] = ()
    thread_id: str | None = None
    addressed: bool = True
    update_id: int | None = None
    media_group_id: str | None = None
    flags: tuple[str, ...] = ()
    row_id: int | None = None
    attachment_refs: tuple[AttachmentRef, ...] = ()  # become `attachments` via Channel.fetch_attachments

    @property
    def is_private(self) -> bool:
        return self.chat_type == "private"

    @property
    def command(self) -> str | None:
        """`/stop`-style command name (lowercase, bot suffix dropped), or None."""
        if not self.text.startswith("/"):
            return None
        head = self.text.split(maxsplit=1)[0][1:]
        return head.split("@", 1)[0].lower() or None


TRUSTED_CHANNELS = frozenset({"terminal"})  # the person at the local keyboard is the owner


def is_owner(inbound: Inbound, owner_id: int | None) -> bool:
    """The owner: the configured user id, or whoever sits at a trusted local channel."""
    return inbound.channel in TRUSTED_CHANNELS or (owner_id is not None and inbound.sender.id == str(owner_id))


# --- actions: what the core asks a channel to do ---


@dataclass(frozen=True)
class SendText:
    chat: str
    text: str
    reply_to: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True)
class EditText:
    chat: str
    message_id: str
    text: str


@dataclass(frozen=True)
class DeleteMessage:
    chat: str
    message_id: str


@dataclass(frozen=True)
class React:
    chat: str
    message_id: str
    emoji: str


@dataclass(frozen=True)
class Typing:
    chat: str
    thread_id: str | None = None


@dataclass(frozen=True)
class SendFile:
    chat: str
    path: str
    kind: Literal["photo", "document"] = "document"
    caption: str | None = None
    reply_to: str | None = None
    thread_id: str | None = None


Action = SendText | EditText | DeleteMessage | React | Typing | SendFile
COSMETIC_ACTIONS = (Typing, React)


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    message_ids: tuple[str, ...] = ()
    error: str | None = None
    # Set by a channel when the failure is temporary: retry, no sooner than this many seconds.
    retry_after: float | None = None
    # Accepted into the outbox but not delivered yet; it keeps trying.
    queued: bool = False

    @classmethod
    def failed(cls, error: str) -> ActionResult:
        return cls(ok=False, error=error)


@dataclass(frozen=True)
class Capabilities:
    max_text: int = 4096
    reactions: bool = True
    edits: bool = True
    typing: bool = True
    files: bool = True
    threads: bool = False
    extra: dict[str, bool] = field(default_factory=dict)
