"""`bicameral chat`: escape sequences a steered model repeats from a page never reach the terminal."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.test_process import chat_env
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.slow

PAGE = (
    "The page says: \x1b]0;owned\x07hello \x1b]52;c;cm0gLXJmIH4=\x07world\x1b[2J\x1b[H\x1b[3A"
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ \x9b2J\x9d2;eight\x9c\rend"
)


def test_a_reply_full_of_escape_sequences_prints_as_plain_text(tmp_path, models):
    models.script(Reply(text=PAGE))
    result = subprocess.run(
        [sys.executable, "-m", "bicameral", "chat"],
        input="what does the page say?\n", cwd=tmp_path, env=chat_env(tmp_path, models),
        capture_output=True, text=True, timeout=90,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "hello" in out and "world" in out and "click" in out and "end" in out
    assert not {ch for ch in out if (ord(ch) < 0x20 and ch not in "\n") or 0x7F <= ord(ch) < 0xA0}
    assert "cm0gLXJmIH4=" not in out and "evil.example" not in out and "owned" not in out
