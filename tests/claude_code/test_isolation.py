"""What a chat's CLI can reach: the owner's tool groups only for the owner, its own directory, nothing it was not handed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bicameral.claude_code.workspace import workspace
from tests.claude_code.conftest import main_requests, sends
from tests.conftest import OWNER

pytestmark = pytest.mark.slow
FRIEND = 2002


def flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


def _captures(data: Path) -> list[Path]:
    """Every wire capture under `data`; os.walk, not glob: the running CLI creates and deletes lock files meanwhile."""
    return [(Path(root) / name).resolve() for root, _, names in os.walk(data) for name in names if name.endswith(".stream.jsonl")]


async def test_a_friend_s_chat_gets_neither_the_owner_s_tool_groups_nor_a_way_to_the_owner_s_files(
    telegram, models, start_cc_bot, tmp_path
):
    data = tmp_path / "data"
    data.mkdir()
    (data / "plugins.json").write_text(json.dumps({"tool_groups": {"bash": True, "code": True}}))
    (data / "access.json").write_text(json.dumps({"policy": "allowlist", "allowed_users": [FRIEND]}))
    models.responder(sends("hello"))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "hi, it's me")
    await telegram.await_sent(OWNER, 1, timeout=40)
    telegram.user_sends(FRIEND, "hi, I'm a friend", user_id=FRIEND, first_name="Bob")
    await telegram.await_sent(FRIEND, 1, timeout=40)

    friend_requests = [r for r in main_requests(models) if 'private chat with "Bob"' in r.system]
    owner_requests = [r for r in main_requests(models) if 'private chat with "Bob"' not in r.system]
    assert friend_requests and owner_requests
    assert {"Bash", "Read"} <= set(owner_requests[0].tool_names)  # the owner unlocked them for themself
    for request in friend_requests:
        assert not {"Bash", "Read", "Write", "Edit", "Grep", "Glob"} & set(request.tool_names)

    owner_spawn = app.handler.worker_for(f"telegram:{OWNER}").spawns[-1]
    friend_spawn = app.handler.worker_for(f"telegram:{FRIEND}").spawns[-1]
    friend_cwd = friend_spawn.cwd.resolve()
    assert friend_cwd != owner_spawn.cwd.resolve()
    private = [
        owner_spawn.cwd.resolve(),  # the owner's CLI working dir
        (data / "cc_logs").resolve(),  # every chat's wire capture
        *_captures(data),
        app.settings.db_path.resolve(),
    ]
    for spawn in (owner_spawn, friend_spawn):
        private.append(spawn.cwd.resolve() / flag(spawn.argv, "--mcp-config"))  # token files (absolute paths)
    for path in private:
        assert not path.is_relative_to(friend_cwd), path
    # Nothing inside the friend's directory links out to them either.
    for path in friend_cwd.rglob("*"):
        assert not path.is_symlink(), path
        assert "Bearer" not in (path.read_text(errors="replace") if path.is_file() else "")
    assert "tool_groups" not in {e.name for e in friend_cwd.iterdir()}


def hostile_settings(marker: Path) -> str:
    """A settings file whose hooks would create `marker` on any session start, prompt, tool call or stop."""
    entry = {"matcher": "*", "hooks": [{"type": "command", "command": f"touch {marker}"}]}
    events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
    return json.dumps({"hooks": {event: [entry] for event in events}})


async def test_a_settings_file_with_a_hook_in_the_cli_s_directory_or_home_does_not_run(
    telegram, models, start_cc_bot, tmp_path, cli_home
):
    data = tmp_path / "data"
    place = workspace(data.resolve(), f"telegram:{OWNER}")
    planted = {
        "cwd": place.cwd / ".claude" / "settings.json",
        "cwd-local": place.cwd / ".claude" / "settings.local.json",
        "home": place.home / ".claude" / "settings.json",
        "parent-home": cli_home / ".claude" / "settings.json",
    }
    markers = {where: tmp_path / f"hooked-{where}" for where in planted}
    for where, path in planted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hostile_settings(markers[where]))
    models.responder(sends(lambda req: "echo " + ("two" if "second" in req.last_user_text() else "one")))
    await start_cc_bot()
    telegram.user_sends(OWNER, "first")
    await telegram.await_sent(OWNER, 1, timeout=40)
    telegram.user_sends(OWNER, "second")  # its answer proves the first turn, and its Stop hook, are over
    sent = await telegram.await_sent(OWNER, 2, timeout=40)
    assert [m["text"] for m in sent] == ["echo one", "echo two"]
    assert [where for where, marker in markers.items() if marker.exists()] == []


async def test_the_cli_inherits_none_of_our_proxy_config_dir_or_claude_code_switches(
    telegram, models, start_cc_bot, monkeypatch, tmp_path
):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "shared-config"))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    monkeypatch.setenv("SOME_SERVICE_PASSWORD", "hunter2")
    models.responder(sends("hello"))
    app = await start_cc_bot()
    telegram.user_sends(OWNER, "hi")
    sent = await telegram.await_sent(OWNER, 1, timeout=40)
    assert sent[0]["text"] == "hello"  # the proxy and Bedrock switch did not reach it, or it could not answer
    env = app.handler.worker_for(f"telegram:{OWNER}").spawns[-1].env
    place = workspace(app.settings.data_dir.resolve(), f"telegram:{OWNER}")
    assert env["HOME"] == str(place.home) and env["CLAUDE_CONFIG_DIR"] == str(place.config_dir)
    leaked = {"HTTPS_PROXY", "https_proxy", "CLAUDE_CODE_USE_BEDROCK", "SOME_SERVICE_PASSWORD"} & set(env)
    assert leaked == set()
