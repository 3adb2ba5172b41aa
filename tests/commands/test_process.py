"""A command's child process, past the policy (as a way out would be): in bubblewrap it sees none of the host's files
and no network, and runs as uid 65534; unconfined it still has no environment. Run directly on a file the policy
would refuse, to see what the process alone holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bicameral.commands.process import ask
from bicameral.commands.trial import confinement
from tests.commands.support import needs_bwrap

ESCAPE = '''import os
import socket

from bicameral.commands import command


@command(name="escape", description="tries")
async def escape() -> str:
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        network = "network"
    except OSError:
        network = "no network"
    return " | ".join([str(os.path.exists({secret!r})), os.environ.get("SECRET_TOKEN", "no token"), network,
                       str(os.getuid())])
'''


@pytest.fixture
def escape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("the bot token")
    monkeypatch.setenv("SECRET_TOKEN", "123:abc")
    folder = tmp_path / "commands"
    folder.mkdir()
    (folder / "escape.py").write_text(ESCAPE.format(secret=str(secret)))
    return folder / "escape.py"


@needs_bwrap
async def test_in_bubblewrap_the_child_sees_no_host_file_no_network_no_environment(escape: Path) -> None:
    found = await confinement("bwrap")
    assert not isinstance(found, str), found
    answer = await ask(escape, {"mode": "call", "arguments": {}, "context": {}}, timeout=20, confinement=found)
    assert answer == {"result": "False | no token | no network | 65534"}


async def test_unconfined_the_child_still_has_no_environment(escape: Path) -> None:
    answer = await ask(escape, {"mode": "call", "arguments": {}, "context": {}}, timeout=20)
    assert answer["result"].split(" | ")[1] == "no token"
    assert answer["result"].split(" | ")[3] == str(os.getuid())
