"""One external server on its own (mcp/remote.py): a start that fails backs off, doubling; a later start works."""

from __future__ import annotations

import sys

import pytest

from bicameral.child_env import child_process_env
from bicameral.mcp.external import parse_servers
from bicameral.mcp.remote import PluginFailure, RemoteServer
from tests.plugins.conftest import REPO


async def test_failed_starts_back_off_and_a_later_start_works(tmp_path):
    mode = tmp_path / "mode"
    mode.write_text("exit", encoding="utf-8")
    launcher = tmp_path / "launch.py"  # the mode is read at each start: first failing, then serving
    launcher.write_text(
        "import pathlib, runpy, sys\n"
        f"sys.argv = ['odd', pathlib.Path({str(mode)!r}).read_text()]\n"
        "runpy.run_module('tests.support.odd_mcp_server', run_name='__main__')\n",
        encoding="utf-8",
    )
    [server], _ = parse_servers([{"name": "odd", "command": sys.executable, "args": [str(launcher)],
                                  "env": {"PYTHONPATH": str(REPO)}}])
    now = [1000.0]
    remote = RemoteServer(server, lookup=lambda name: None, base_env=child_process_env(), start_timeout=20,
                          clock=lambda: now[0])
    try:
        with pytest.raises(PluginFailure, match=r"the odd plugin failed to start .*giving up at once"):
            await remote.call("echo", {"message": "a"})
        with pytest.raises(PluginFailure, match="failed to start; it is tried again in 1s"):
            await remote.call("echo", {"message": "b"})
        now[0] += 1.0
        with pytest.raises(PluginFailure, match="failed to start"):
            await remote.call("echo", {"message": "c"})
        with pytest.raises(PluginFailure, match="tried again in 2s"):
            await remote.call("echo", {"message": "d"})
        mode.write_text("serve", encoding="utf-8")
        now[0] += 2.0
        assert await remote.call("echo", {"message": "e"}) == ("odd echo: e", False)
    finally:
        await remote.aclose()
