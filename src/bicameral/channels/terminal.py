"""The terminal channel: a conversation on stdin/stdout with the person at the keyboard."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import sys
import time
from collections.abc import Callable
from typing import IO

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

from bicameral.channels.base import InboundSink, OnEnd
from bicameral.events import (
    Action,
    ActionResult,
    Capabilities,
    CommandMenu,
    DeleteMessage,
    EditText,
    Inbound,
    React,
    Sender,
    SendFile,
    SendText,
    Typing,
    chat_key,
)
from bicameral.text import normalize

CHAT = chat_key("terminal", "local")


class TerminalChannel:
    name = "terminal"
    capabilities = Capabilities(max_text=1_000_000, typing=False, threads=False, buttons=False)

    def __init__(
        self,
        *,
        stdin: IO[str] | None = None,
        console: Console | None = None,
        user_name: str = "you",
        bot_name: str = "bicameral",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._stdin = stdin or sys.stdin
        self._console = console or Console(file=_own_stdout(), highlight=False)
        self._user = Sender(id="local", name=user_name)
        self._bot_name = bot_name
        self._clock = clock
        self._ids = itertools.count(1)
        self._reader: asyncio.Task[None] | None = None
        self._streamed: str | None = None  # the reply being printed as it streams, if any

    async def start(self, sink: InboundSink, on_end: OnEnd) -> None:
        self._console.print(f"[dim]Talking to {self._bot_name}. /stop interrupts, /reset starts fresh, Ctrl-D quits.[/dim]")
        self._reader = asyncio.create_task(self._read(sink, on_end))

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    def show_partial(self, text: str) -> None:
        """Print a piece of the reply as the model produces it; the reply's SendText then just ends the line."""
        if self._streamed is None:
            self._console.print(f"[bold cyan]{self._bot_name} ›[/bold cyan] ", end="")
            self._streamed = ""
        self._streamed += text
        self._console.print(printable(text), end="", markup=False, highlight=False, soft_wrap=True)

    async def perform(self, action: Action) -> ActionResult:
        if isinstance(action, SendText):
            message_id = str(next(self._ids))
            streamed, self._streamed = self._streamed, None
            if streamed is not None:
                self._console.print()
                if streamed.strip() == action.text.strip():
                    return ActionResult(ok=True, message_ids=(message_id,))
            # Not streamed, or the reply differs from what streamed (an error note, a cut): show it whole.
            self._console.print(f"[bold cyan]{self._bot_name} ›[/bold cyan]", Markdown(printable(action.text)))
            # No buttons here: the choices are numbered, and typing a number (or the words) answers.
            for number, (label, _) in enumerate(action.buttons, 1):
                self._console.print(f"  {number}. {printable(label)}", markup=False, highlight=False)
            return ActionResult(ok=True, message_ids=(message_id,))
        # Every value below can come from a model's tool call: printed as text, never read as markup.
        if isinstance(action, EditText):
            self._console.print(f"[dim](edited m{_shown(action.message_id)})[/dim]", Markdown(printable(action.text)))
        elif isinstance(action, DeleteMessage):
            self._console.print(f"[dim](deleted m{_shown(action.message_id)})[/dim]")
        elif isinstance(action, React):
            self._console.print(f"[dim]{self._bot_name} reacted {_shown(action.emoji)}[/dim]")
        elif isinstance(action, SendFile):
            message_id = str(next(self._ids))
            shown = _shown(f"[{action.kind}] {action.path} {action.caption or ''}")
            self._console.print(f"[bold cyan]{self._bot_name} ›[/bold cyan] {shown}")
            return ActionResult(ok=True, message_ids=(message_id,))
        elif isinstance(action, Typing):
            pass  # a terminal shows the answer when it comes; no indicator needed
        return ActionResult(ok=True)

    async def fetch_attachments(self, inbound: Inbound) -> Inbound:
        """Typed lines carry no files."""
        return inbound

    async def show_commands(self, menu: CommandMenu) -> None:
        """A terminal has no menu: /help lists the commands."""

    async def _read(self, sink: InboundSink, on_end: OnEnd) -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, self._stdin.readline)
            if line == "":
                on_end(None)
                return
            text = line.rstrip("\n")
            if not text.strip():
                continue
            message_id = f"u{next(self._ids)}"
            await sink([
                Inbound(
                    channel=self.name,
                    chat=CHAT,
                    message_id=message_id,
                    sender=self._user,
                    text=text,
                    ts=self._clock(),
                    kind="command" if text.startswith("/") else "message",
                )
            ])


# What a terminal acts on rather than shows, in 7-bit and 8-bit (C1) form: CSI sequences (cursor moves,
# screen clears, colours), the strings of OSC, DCS, SOS, PM and APC (window titles, OSC 52 clipboard writes,
# hyperlinks) up to their BEL or ST, or to the end when unterminated (a terminal would swallow that too),
# and the other escapes (ESC c resets the terminal, ESC 7/8 move the cursor, ESC ( B switches charsets).
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)


def printable(text: str) -> str:
    """`text` as a terminal will only show it: escape sequences removed whole, then every other control
    code but newline and tab (a CR would let a line overwrite what came before), bidi and invisible
    characters, with the one normaliser the gate uses. Compatibility characters stay as written."""
    return normalize(_ESCAPE_SEQUENCE.sub("", text), compose=False).text


def _shown(text: str) -> str:
    """A value printed inside our own markup: printable, and its brackets not read as rich markup."""
    return escape(printable(text))


def _own_stdout() -> IO[str]:
    """A duplicate of stdout for the conversation, which stays on the terminal while a library points fd 1 at
    /dev/null (llama.cpp does while the local model loads in the background, which would swallow the prompt)."""
    try:
        fd = os.dup(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # no real stdout (an IDE, a test): use what there is
        return sys.stdout
    return open(fd, "w", encoding=sys.stdout.encoding or "utf-8", errors="replace", buffering=1)
