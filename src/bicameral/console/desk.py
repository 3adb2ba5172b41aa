"""The desk between the gate and the lanes: owner commands run here, and the pause holds everyone else."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bicameral.events import AnswerPress, CommandMenu, Inbound, OwnerId, Purpose, SendText, is_owner, person_key
from bicameral.failures import command_failed
from bicameral.store.kv import KeyValueStore
from bicameral.store.messages import MessageStore
from bicameral.types import Perform

log = logging.getLogger(__name__)

PAUSED_KEY = "console.paused"
STALE_BUTTON = "This button no longer does anything."


@dataclass(frozen=True)
class Asked:
    """One owner command as sent: the message it came in, its name and the words after it."""

    inbound: Inbound
    name: str
    argument: str


@dataclass(frozen=True)
class Secret:
    """An answer that holds a one-time secret (a pairing code): sent once, straight to the chat, never logged or kept."""

    text: str


@dataclass(frozen=True)
class OwnerCommand:
    """A command only the owner may use, answered without a model."""

    name: str
    usage: str  # as /help shows it: "/logs [N]"
    summary: str  # one line, also Telegram's menu text
    run: Callable[[Asked], Awaitable[str | Secret]]


@dataclass(frozen=True)
class MemberCommand:
    """A command everyone allowed in may use (the lanes answer them)."""

    name: str
    usage: str
    summary: str


MEMBER_COMMANDS: tuple[MemberCommand, ...] = (
    MemberCommand("stop", "/stop", "stop what I'm doing"),
    MemberCommand("reset", "/reset", "start our conversation fresh"),
    MemberCommand("memory", "/memory", "what I remember about you"),
    MemberCommand("forget", "/forget <id or words>", "delete something I remember"),
    MemberCommand("reminders", "/reminders", "your reminders and scheduled tasks"),
    MemberCommand("timezone", "/timezone <Area/City>", "set your time zone"),
    MemberCommand("help", "/help", "what you can ask me and the commands"),
)


def command_of(inbound: Inbound) -> tuple[str, str] | None:
    """The command a message is (its name and the words after it), if it is one a person typed just now.

    An edit, a forwarded message or a caption is never a command: each carries words someone else wrote, or wrote
    earlier, and re-running /kill because a message was edited would surprise anyone.
    """
    name = inbound.command
    if name is None or inbound.kind not in ("message", "command") or {"forwarded", "caption"} & set(inbound.flags):
        return None
    parts = inbound.text.split(maxsplit=1)
    return name, parts[1].strip() if len(parts) > 1 else ""


def looks_like_owner_command(inbound: Inbound, names: frozenset[str]) -> bool:
    """Whether the message starts with an owner command's name, however it came (edited, forwarded, captioned)."""
    return inbound.command in names


class Console:
    """Runs the owner's commands, holds everyone else's messages while paused, and forwards the rest."""

    def __init__(
        self,
        commands: Sequence[OwnerCommand],
        *,
        owner_id: OwnerId,
        bot_name: str,
        forward: Callable[[Inbound], Awaitable[None]],
        send: Perform,
        messages: MessageStore,
        kv: KeyValueStore,
    ) -> None:
        self._commands = {c.name: c for c in commands}
        self._owner_id = owner_id
        self._bot_name = bot_name
        self._forward = forward
        self._send = send
        self._messages = messages
        self._kv = kv
        self._held: list[Inbound] = []
        self._after_reply: list[Callable[[], None]] = []
        # The owner's own commands (usage, summary) as loaded now, for /help; set by the app once they exist.
        self.more_commands: Callable[[], Sequence[tuple[str, str]]] = lambda: ()
        self._replies: set[asyncio.Task[object]] = set()

    def add(self, commands: Sequence[OwnerCommand]) -> None:
        """Add commands (those that act on the console itself are made after it)."""
        self._commands.update((c.name, c) for c in commands)

    @property
    def owner_commands(self) -> tuple[OwnerCommand, ...]:
        return tuple(self._commands.values())

    @property
    def names(self) -> frozenset[str]:
        """Every owner command's name: the gate drops these from anyone else unread."""
        return frozenset(self._commands)

    @property
    def paused(self) -> bool:
        return self._kv.get(PAUSED_KEY) == "1"

    async def submit(self, inbound: Inbound) -> None:
        """Take one stored inbound: an owner command runs now; while paused others' messages wait; the rest go on."""
        if inbound.kind == "press":
            # Every button's owner took its presses before here: this one belongs to nothing open.
            self._messages.mark_consumed([inbound.row_id])
            if inbound.press is not None:
                await self._send(AnswerPress(chat=inbound.chat, press_id=inbound.press.id, text=STALE_BUTTON))
            return
        owner = is_owner(inbound, self._owner_id)
        asked = command_of(inbound)
        if asked is not None and asked[0] in ("help", "start"):
            self._messages.mark_consumed([inbound.row_id])
            self._reply(inbound, self.help_text(owner=owner))
            return
        if inbound.command in self._commands:
            self._messages.mark_consumed([inbound.row_id])
            if owner and asked is not None:
                await self._run(self._commands[asked[0]], Asked(inbound, *asked))
            return  # anyone else's, or an edited or forwarded one: nothing happens, nothing is said
        if self.paused and not owner and inbound.kind != "synthetic":
            self._held.append(inbound)  # still pending in the store: answered on resume, or after a restart
            return
        await self._forward(inbound)

    def holds(self, chat: str) -> bool:
        """Whether a message of the chat waits here for the owner's /resume."""
        return any(inbound.chat == chat for inbound in self._held)

    async def resume_if_resumed(self) -> None:
        """Hand over what waits here once the pause is over (the owner's /resume may have reached another worker)."""
        if self._held and not self.paused:
            await self.resume()

    async def pause(self) -> None:
        self._kv.set(PAUSED_KEY, "1")

    async def resume(self) -> int:
        """Stop holding messages and hand over what waited, in the order it came; returns how many."""
        self._kv.delete(PAUSED_KEY)
        held, self._held = self._held, []
        for inbound in held:
            await self._forward(inbound)
        return len(held)

    def menu(self) -> CommandMenu:
        """The commands each person may use, for a platform's menu."""
        return CommandMenu(
            everyone=tuple((c.name, c.summary) for c in MEMBER_COMMANDS),
            owner=tuple((c.name, c.summary) for c in self._commands.values()),
            owner_id=self._owner_id,
        )

    def help_text(self, *, owner: bool) -> str:
        lines = [f"Hi, I'm {self._bot_name}. Just write to me like you would to a person.", ""]
        lines += [f"{c.usage} — {c.summary}" for c in MEMBER_COMMANDS]
        if more := self.more_commands():
            lines += ["", "Commands the owner added:", *(f"{usage} — {summary}" for usage, summary in more)]
        if owner and self._commands:
            lines += ["", "Yours as the owner:"]
            lines += [f"{c.usage} — {c.summary}" for c in self._commands.values()]
        return "\n".join(lines)

    def after_reply(self, then: Callable[[], None]) -> None:
        """Call `then` once the answer to the command running now has been sent (or failed to be)."""
        self._after_reply.append(then)

    async def close(self) -> None:
        for reply in list(self._replies):
            reply.cancel()
        self._replies.clear()

    async def _run(self, command: OwnerCommand, asked: Asked) -> None:
        answer: str | Secret
        try:
            answer = await command.run(asked)
        except Exception:
            log.exception("/%s failed", command.name)
            answer = command_failed(command.name)
        after, self._after_reply = self._after_reply, []
        if isinstance(answer, Secret):
            reply = self._reply(asked.inbound, answer.text, purpose="secret")
        else:
            reply = self._reply(asked.inbound, answer or "Done.")
        for then in after:
            reply.add_done_callback(lambda _, then=then: then())  # type: ignore[misc]

    def _reply(self, inbound: Inbound, text: str, purpose: Purpose = "conversation") -> asyncio.Task[object]:
        """Answer in the background: a slow or rate-limited send must not hold up intake."""
        reply_to = None if inbound.is_private else inbound.message_id
        action = SendText(
            chat=inbound.chat, text=text, reply_to=reply_to, thread_id=inbound.thread_id, audience=(person_key(inbound),),
            purpose=purpose,
        )
        task: asyncio.Task[object] = asyncio.ensure_future(self._send(action))
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)
        return task
