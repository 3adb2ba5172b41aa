"""Chats do not share what the owner unlocked: tool groups follow the owner, each chat's CLI has its own directory."""

from __future__ import annotations

import json

import pytest

from tests.claude_code.conftest import main_requests, sends
from tests.conftest import OWNER

pytestmark = pytest.mark.slow
FRIEND = 2002


def flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


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

    friend_requests = [r for r in main_requests(models) if "private chat with Bob" in r.system]
    owner_requests = [r for r in main_requests(models) if "private chat with Bob" not in r.system]
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
        *(data.resolve().glob("**/*.stream.jsonl")),
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
