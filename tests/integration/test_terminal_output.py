"""The terminal conversation stays visible while a library silences stdout (llama.cpp does while loading)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import bicameral

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
