"""access.json: policies, hot reload, and a broken file that changes nothing."""

from __future__ import annotations

import json
import os
import time

from bicameral.events import Inbound, Sender
from bicameral.gate.access import AccessPolicy

OWNER = 42


def _msg(sender: int, chat: int | None = None, chat_type: str = "private", channel: str = "telegram") -> Inbound:
    chat = sender if chat is None else chat
    return Inbound(
        channel=channel,
        chat=f"{channel}:{chat}",
        message_id="1",
        sender=Sender(id=str(sender), name="x"),
        text="hi",
        ts=0,
        chat_type=chat_type,
    )


def _write(access: AccessPolicy, **config) -> None:
    access.path.write_text(json.dumps(config))
    future = time.time() + 5  # mtime granularity must not hide the change
    os.utime(access.path, (future, future))


def test_first_run_creates_owner_only(tmp_path):
    policy = AccessPolicy(tmp_path / "access.json", OWNER)
    assert json.loads(policy.path.read_text())["policy"] == "owner_only"
    assert policy.allows(_msg(OWNER))
    assert not policy.allows(_msg(7))
    assert not policy.allows(_msg(OWNER, chat=-100, chat_type="group"))


def test_allowlist_admits_listed_users_and_chats(tmp_path):
    policy = AccessPolicy(tmp_path / "access.json", OWNER)
    _write(policy, policy="allowlist", allowed_users=[7], allowed_chats=[-100])
    assert policy.allows(_msg(7))
    assert not policy.allows(_msg(8))
    assert policy.allows(_msg(8, chat=-100, chat_type="supergroup"))
    assert not policy.allows(_msg(OWNER, chat=-200, chat_type="supergroup"))


def test_open_admits_everyone(tmp_path):
    policy = AccessPolicy(tmp_path / "access.json", OWNER)
    _write(policy, policy="open")
    assert policy.allows(_msg(9)) and policy.allows(_msg(9, chat=-5, chat_type="group"))


def test_broken_file_keeps_the_last_good_policy(tmp_path, caplog):
    policy = AccessPolicy(tmp_path / "access.json", OWNER)
    _write(policy, policy="allowlist", allowed_users=[7])
    assert policy.allows(_msg(7))
    policy.path.write_text("{ this is not json")
    future = time.time() + 10
    os.utime(policy.path, (future, future))
    assert policy.allows(_msg(7))
    assert not policy.allows(_msg(8))
    assert any("ignoring broken" in r.getMessage() for r in caplog.records)


def test_unknown_policy_name_is_refused_not_treated_as_open(tmp_path):
    policy = AccessPolicy(tmp_path / "access.json", OWNER)
    _write(policy, policy="everyone")
    assert not policy.allows(_msg(9))


def test_terminal_is_the_owner_at_the_keyboard(tmp_path):
    policy = AccessPolicy(tmp_path / "access.json", None)
    assert policy.allows(_msg(0, channel="terminal"))
