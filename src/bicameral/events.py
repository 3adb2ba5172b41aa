"""The channel-agnostic vocabulary: what comes in (Inbound) and what goes out (Action)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

ChatType = Literal["private", "group", "supergroup", "channel"]
# "press": someone pressed one of our inline buttons (`Inbound.press` says which); it is never a turn's words.
InboundKind = Literal["message", "edit", "command", "synthetic", "press"]


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


AttachmentKind = Literal["photo", "document", "voice"]  # voice: a voice note or an audio file


@dataclass(frozen=True)
class Attachment:
    """A file the channel saved under the data dir; `path` is relative to it."""

    kind: AttachmentKind
    path: str
    mime: str | None = None
    name: str | None = None
    size: int = 0
    workspace_path: str | None = None  # its copy in the chat's workspace, where the file tools find it
    # What reading it gave (media/intake.py, once, before the turn that answers it): a document's text (or its
    # page-by-page digest when long) or a voice note's transcript; `note` is the sentence when there is none.
    text: str | None = None
    note: str | None = None
    text_path: str | None = None  # a document's whole text, in the chat's workspace, for the file tools

    @property
    def read(self) -> bool:
        """Whether intake has read it (photos need no reading: the model sees them)."""
        return self.kind == "photo" or self.text is not None or self.note is not None


@dataclass(frozen=True)
class AttachmentRef:
    """A file on an inbound message, not downloaded yet: the gate has it fetched only for admitted senders."""

    kind: AttachmentKind
    file_id: str
    name: str
    size: int = 0
    mime: str | None = None


@dataclass(frozen=True)
class Press:
    """A press on an inline button: the platform's id for answering it and the button's opaque data (ours, or forged)."""

    id: str
    data: str


@dataclass(frozen=True)
class Quoted:
    """The message an inbound replies to: the referent, not the latest context."""

    message_id: str
    sender_name: str
    text: str
    from_bot: bool = False


class Role(IntEnum):
    """What the platform vouches a person is in a chat; higher may do more."""

    MEMBER = 1
    ADMIN = 2  # a group admin: may steer and stop others' work in that group
    OWNER = 3


@dataclass(frozen=True)
class Authority:
    """Whose words caused something and what they may do: the least role of them all, and who they are.

    A turn, a task or a schedule carries one. Joining another person's words never raises it.
    """

    role: Role
    people: tuple[str, ...] = ()  # person keys (`channel:user-id`), sorted, no repeats

    @classmethod
    def of(cls, role: Role, people: Iterable[str]) -> Authority:
        return cls(Role(role), tuple(sorted(set(people))))

    @classmethod
    def least(cls, authorities: Iterable[Authority]) -> Authority:
        """The rights of everyone together: the lowest role, every person."""
        items = list(authorities)
        if not items:
            raise ValueError("no authority to join")
        return cls.of(min(a.role for a in items), (p for a in items for p in a.people))

    @classmethod
    def loads(cls, text: str | None) -> Authority | None:
        """From its stored JSON; None stays None (a row from before authority was kept)."""
        if not text:
            return None
        data = json.loads(text)
        return cls.of(data["role"], data["people"])

    def dumps(self) -> str:
        return json.dumps({"role": int(self.role), "people": list(self.people)})

    def joined(self, other: Authority) -> Authority:
        return Authority.least((self, other))

    @property
    def is_owner(self) -> bool:
        return self.role is Role.OWNER

    def among(self, people: Iterable[str]) -> bool:
        """Whether every one of these people is among `people` (no one at all is never among anyone)."""
        return bool(self.people) and set(self.people) <= set(people)

    def may_steer(self, owned_by: Authority) -> bool:
        """Whether these people may change or stop work that `owned_by` caused: their own, or any as owner or admin."""
        return self.role >= Role.ADMIN or self.among(owned_by.people)

    def may_read(self, owned_by: Authority) -> bool:
        """Whether these people may see what work by `owned_by` saw: their own, or the owner's own eyes."""
        return self.is_owner or self.among(owned_by.people)


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
    # The rights a synthetic message's words carry (a fired schedule: the least of its authors); None for a person's.
    authority: Authority | None = None
    press: Press | None = None  # on kind "press": the button pressed on our message `message_id`

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


# The person at the local keyboard is the owner, and so is whoever holds a dashboard session (its web chat).
TRUSTED_CHANNELS = frozenset({"terminal", "web"})


@dataclass(frozen=True)
class Owners:
    """The owner's user id on each channel that names one: Telegram's number, a Matrix user id."""

    ids: tuple[tuple[str, str], ...] = ()  # (channel, user id)

    @classmethod
    def of(cls, **by_channel: object) -> Owners:
        """`Owners.of(telegram=1001, matrix="@ann:example.org")`; an unset one (None) is left out."""
        return cls(tuple((channel, str(user)) for channel, user in by_channel.items() if user is not None))

    def on(self, channel: str) -> str | None:
        return next((user for known, user in self.ids if known == channel), None)


# Who the owner is: one user id (a number counts on every channel, as before there were several), the owner's id
# per channel, or nobody.
OwnerId = int | Owners | None


def owner_on(owner_id: OwnerId, channel: str) -> str | None:
    """The owner's user id on this channel, if one is set."""
    if isinstance(owner_id, Owners):
        return owner_id.on(channel)
    return None if owner_id is None else str(owner_id)


def owner_ids(owner_id: OwnerId) -> frozenset[str]:
    """Every user id the owner goes by."""
    if isinstance(owner_id, Owners):
        return frozenset(user for _, user in owner_id.ids)
    return frozenset() if owner_id is None else frozenset({str(owner_id)})


def is_owner(inbound: Inbound, owner_id: OwnerId) -> bool:
    """The owner: the configured user id, or whoever sits at a trusted local channel."""
    return sender_role(inbound.channel, inbound.sender.id, owner_id) is Role.OWNER


def sender_role(channel: str, sender_id: str | None, owner_id: OwnerId, *, admin: bool = False) -> Role:
    """A sender's role from what the platform vouches (their id, its admin flag); a display name never counts."""
    owner = owner_on(owner_id, channel)
    if channel in TRUSTED_CHANNELS or (owner is not None and sender_id == owner):
        return Role.OWNER
    return Role.ADMIN if admin else Role.MEMBER


def person_key(inbound: Inbound) -> str:
    """The sender as one person across chats: `channel:user-id`."""
    return chat_key(inbound.channel, inbound.sender.id)


def role_of(inbound: Inbound, owner_id: OwnerId) -> Role:
    """The sender's role as the platform vouches for it (admin means something only in a group)."""
    return sender_role(inbound.channel, inbound.sender.id, owner_id, admin=inbound.sender.is_admin and not inbound.is_private)


def authority_of(inbound: Inbound, owner_id: OwnerId) -> Authority:
    """What one message's words may cause: a synthetic message carries its own, a person's is theirs."""
    if inbound.kind == "synthetic" and inbound.authority is not None:
        return inbound.authority
    return Authority.of(role_of(inbound, owner_id), (person_key(inbound),))


def batch_authority(batch: Iterable[Inbound], owner_id: OwnerId) -> Authority:
    """A burst's rights: the least of everyone whose words are in it."""
    return Authority.least(authority_of(inbound, owner_id) for inbound in batch)


# --- actions: what the core asks a channel to do ---


# What a sent text is. "conversation": an answer or an interim word, delivered however long it takes and kept in
# the chat's history. "notice": the gate's word to someone refused or limited, delivered the same way and kept apart
# from any history a model reads. "status": the progress note, sent at once or not at all (it is stale a moment
# later, so it is never queued or retried).
# conversation: part of the chat's history; notice: kept apart from every history a model reads; status: a
# progress line, sent at once and once; secret: a one-time secret for its reader (a pairing code), sent at once and
# once, and neither logged nor kept in full.
Purpose = Literal["conversation", "notice", "status", "secret"]
SECRET_PLACEHOLDER = "[a one-time secret: not kept]"


@dataclass(frozen=True)
class SendText:
    chat: str
    text: str
    reply_to: str | None = None
    thread_id: str | None = None
    # Whose words it answers (person keys): only they, and the owner, may have it edited or deleted later.
    audience: tuple[str, ...] = ()
    purpose: Purpose = "conversation"
    # A text the channel splits into several messages: the ids of the first parts, delivered by an earlier attempt
    # that stopped part-way. The channel sends only the rest, and the result names every part.
    sent_parts: tuple[str, ...] = ()
    # Inline buttons under the text, one per row: (label, data). The data comes back on a press, so it is short
    # and opaque (Telegram allows 64 bytes), never user text. A channel without buttons lists the labels.
    buttons: tuple[tuple[str, str], ...] = ()
    # The key of the Draft this text ends: a channel still showing that draft puts this text in its place.
    draft: str | None = None


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
class AnswerPress:
    """Tell the presser their press arrived (it stops the client's spinner), with a short note or none."""

    chat: str
    press_id: str
    text: str = ""


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
    audience: tuple[str, ...] = ()  # as for SendText


@dataclass(frozen=True)
class Draft:
    """A reply as it is being written, the whole text so far, for a channel with `Capabilities.drafts` (others are
    never handed one); empty text takes the draft away (the call ended without a reply). `key` names the turn's
    draft, which a SendText naming it replaces."""

    chat: str
    key: str
    text: str


Action = SendText | EditText | DeleteMessage | React | Typing | SendFile | AnswerPress | Draft
COSMETIC_ACTIONS = (Typing, React, AnswerPress, Draft)  # never queued, retried or kept


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    # What the action made or touched; for a text sent in parts, the parts that arrived, even when it failed.
    message_ids: tuple[str, ...] = ()
    error: str | None = None
    # Set by a channel when the failure is temporary: retry, no sooner than this many seconds. The channel
    # itself never waits: the outbox does, for the actions it keeps.
    retry_after: float | None = None
    # Accepted into the outbox but not delivered yet; it keeps trying.
    queued: bool = False

    @classmethod
    def failed(cls, error: str) -> ActionResult:
        return cls(ok=False, error=error)


@dataclass(frozen=True)
class CommandMenu:
    """The commands a platform's menu offers: everyone's, and the owner's own beside them (name, one line each)."""

    everyone: tuple[tuple[str, str], ...]
    owner: tuple[tuple[str, str], ...]
    owner_id: OwnerId


@dataclass(frozen=True)
class Capabilities:
    max_text: int = 4096
    reactions: bool = True
    edits: bool = True
    typing: bool = True
    files: bool = True
    threads: bool = False
    buttons: bool = True  # without them a choice's labels are numbered, and a typed number or label answers
    drafts: bool = False  # shows a reply while it is written (Draft actions); the router hands drafts to no other
    extra: dict[str, bool] = field(default_factory=dict)
