"""access.json changed by the owner's commands: read afresh, written atomically with a backup, a broken file left alone."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from bicameral.console.access import Target, parse_target
from bicameral.events import Inbound, Sender
from bicameral.gate.access import AccessConfig, AccessFileError, AccessPolicy

OWNER = 42


def _dm(sender: int) -> Inbound:
    chat = f"telegram:{sender}"
    return Inbound(channel="telegram", chat=chat, message_id="1", sender=Sender(str(sender), "x"), text="hi", ts=0)


def _add_user(user: int):
    def change(config: AccessConfig) -> AccessConfig:
        return config.model_copy(update={"policy": "allowlist", "allowed_users": [*config.allowed_users, user]})

    return change


def _hand_edit(access: AccessPolicy, text: str) -> None:
    access.path.write_text(text)
    future = time.time() + 5  # the mtime must not hide the change from the reload
    os.utime(access.path, (future, future))


def test_an_update_reads_the_file_afresh_writes_it_and_keeps_the_previous_version(tmp_path):
    access = AccessPolicy(tmp_path / "access.json", OWNER)
    before = access.path.read_bytes()
    # Someone edits the file by hand; the update starts from their version, not the one in memory.
    access.path.write_text(json.dumps({"policy": "allowlist", "allowed_users": [7], "note": "my friends"}))
    access.update(_add_user(8))
    written = json.loads(access.path.read_text())
    assert written["allowed_users"] == [7, 8]
    assert written["note"] == "my friends"  # a key we do not know is kept
    assert json.loads(access.backup_path.read_text()) == {"policy": "allowlist", "allowed_users": [7], "note": "my friends"}
    assert access.allows(_dm(8))  # in force at once
    access.update(_add_user(9))
    assert json.loads(access.backup_path.read_text())["allowed_users"] == [7, 8]
    assert before != access.backup_path.read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_an_update_keeps_the_files_permissions(tmp_path):
    access = AccessPolicy(tmp_path / "access.json", OWNER)
    os.chmod(access.path, 0o640)
    access.update(_add_user(8))
    assert stat.S_IMODE(access.path.stat().st_mode) == 0o640


@pytest.mark.parametrize("broken", ["{ not json", '{"policy": "everyone"}', '{"allowed_users": "all"}', "\xff"])
def test_a_broken_file_is_not_overwritten_with_the_last_good_policy(tmp_path, broken):
    access = AccessPolicy(tmp_path / "access.json", OWNER)
    access.update(_add_user(7))
    assert access.backup_path.exists()
    backup = access.backup_path.read_bytes()
    _hand_edit(access, broken)
    assert access.allows(_dm(7))  # the last good policy stays in force
    with pytest.raises(AccessFileError) as raised:
        access.update(_add_user(8))
    assert raised.value.path == access.path and raised.value.reason
    assert access.path.read_text() == broken
    assert access.backup_path.read_bytes() == backup
    assert not access.allows(_dm(8))
    with pytest.raises(AccessFileError):
        access.read()


def test_a_change_that_changes_nothing_writes_nothing(tmp_path):
    access = AccessPolicy(tmp_path / "access.json", OWNER)
    stamp = access.path.stat().st_mtime_ns, access.path.stat().st_ino
    access.update(lambda config: config)
    assert (access.path.stat().st_mtime_ns, access.path.stat().st_ino) == stamp
    assert not access.backup_path.exists()


def test_a_hand_edit_right_after_an_update_is_still_noticed(tmp_path):
    access = AccessPolicy(tmp_path / "access.json", OWNER)
    access.update(_add_user(7))
    replaced = tmp_path / "new.json"
    replaced.write_text(json.dumps({"policy": "allowlist", "allowed_users": [9]}))
    os.replace(replaced, access.path)  # an editor's save: a new inode, possibly in the same mtime tick
    assert access.allows(_dm(9)) and not access.allows(_dm(7))


@pytest.mark.parametrize(
    ("argument", "target"),
    [
        ("2002", Target("user", 2002)),
        ("-100777", Target("chat", -100777)),
        ("user 2002", Target("user", 2002)),
        ("group -100777", Target("chat", -100777)),
        ("GROUP -5", Target("chat", -5)),
        ("chat -5", Target("chat", -5)),
        ("@alice:matrix.org", Target("user", "@alice:matrix.org")),
        ("user @alice:matrix.org", Target("user", "@alice:matrix.org")),
        ("!room:matrix.org", Target("chat", "!room:matrix.org")),
        ("group !room:matrix.org", Target("chat", "!room:matrix.org")),
    ],
)
def test_ids_are_read_as_users_or_chats(argument, target):
    assert parse_target(argument) == target


@pytest.mark.parametrize(
    "argument",
    ["", "alice", "12a", "0", "--5", "user -5", "user !room:x", "group @alice:x", "user", "user 1 2", "1 2", "@alice",
     "member 5", "1.5", "99999999999999999999999"],
)
def test_anything_else_is_not_an_id(argument):
    assert parse_target(argument) is None
