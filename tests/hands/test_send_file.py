"""send_file: a workspace file goes out (at once in a turn, with the result in a task), anything else is refused."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from bicameral.events import SendFile
from bicameral.sandbox.artifacts import Artifact, Outgoing, available, discard, prune
from bicameral.sandbox.workspace import workspace_for
from tests.hands.test_files import TRAVERSALS


def _write(ctx, name: str, data: bytes) -> Path:
    path = workspace_for(ctx.data_dir, ctx.chat) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


async def test_in_a_turn_the_file_is_sent_at_once_as_a_snapshot(registry, make_ctx, outbox):
    ctx = make_ctx()
    source = _write(ctx, "out/report.csv", b"a,b\n1,2\n")
    result = await registry.execute("send_file", {"path": "out/report.csv", "caption": "the report"}, ctx)
    assert not result.is_error, result.content
    (action,) = outbox.actions
    assert isinstance(action, SendFile) and action.kind == "document" and action.caption == "the report"
    assert action.path.startswith("outgoing/")
    source.write_bytes(b"changed later")  # what was checked is what goes out, even on a retry much later
    assert (ctx.data_dir / action.path).read_bytes() == b"a,b\n1,2\n"
    assert ctx.sent_message_ids == ["1"]


async def test_an_image_goes_as_a_photo(registry, make_ctx, outbox):
    ctx = make_ctx()
    _write(ctx, "chart.png", b"\x89PNG\r\n\x1a\n" + b"0" * 100)
    assert not (await registry.execute("send_file", {"path": "chart.png"}, ctx)).is_error
    assert outbox.actions[0].kind == "photo"


async def test_in_a_task_the_file_is_held_for_the_result_and_stored_as_chosen(registry, make_ctx, outbox):
    stored: list[tuple[Artifact, ...]] = []
    ctx = dataclasses.replace(make_ctx(), outgoing=Outgoing(on_change=stored.append), hold_files=True)
    _write(ctx, "a.txt", b"one")
    _write(ctx, "b.txt", b"two")
    for path in ("a.txt", "b.txt", "./a.txt"):
        result = await registry.execute("send_file", {"path": path}, ctx)
        assert "delivered with your result" in result.content
    assert outbox.actions == [], "the back never messages the user itself"
    assert [a.name for a in ctx.outgoing.items] == ["b.txt", "a.txt"], "sending a file again replaces it"
    assert stored[-1] == tuple(ctx.outgoing.items)
    assert all(available(ctx.data_dir, a) for a in ctx.outgoing.items)


@pytest.mark.parametrize("path", TRAVERSALS)
async def test_traversal_spellings_are_refused(registry, make_ctx, outbox, path):
    ctx = make_ctx()
    workspace_for(ctx.data_dir, ctx.chat)
    result = await registry.execute("send_file", {"path": path}, ctx)
    assert result.is_error
    assert outbox.actions == []


async def test_hostile_files_are_refused_with_a_clear_reason(registry, make_ctx, outbox, tmp_path):
    ctx = dataclasses.replace(make_ctx(), outgoing=Outgoing(max_files=2, max_bytes=1000))
    root = workspace_for(ctx.data_dir, ctx.chat)
    other = workspace_for(ctx.data_dir, "telegram:2002")
    (other / "secret.csv").write_bytes(b"someone else's")
    outside = tmp_path / "host-secret.txt"
    outside.write_text("host")
    os.symlink(outside, root / "link-out.txt")
    os.symlink(other / "secret.csv", root / "link-other.csv")
    os.symlink("/dev/zero", root / "zero")
    os.mkfifo(root / "pipe")
    (root / "dir").mkdir()
    _write(ctx, "big.bin", b"x" * 1001)
    _write(ctx, "empty.txt", b"")
    cases = {
        "../telegram_2002/secret.csv": "'..'",
        str(other / "secret.csv"): "absolute",
        "/etc/passwd": "absolute",
        "link-out.txt": "outside the workspace",
        "link-other.csv": "outside the workspace",
        "zero": "outside the workspace",
        "pipe": "not a regular file",
        "dir": "is a directory",
        "big.bin": "at most 1000 bytes",
        "empty.txt": "empty",
        "missing.txt": "no file",
    }
    for path, why in cases.items():
        result = await registry.execute("send_file", {"path": path}, ctx)
        assert result.is_error and why in result.content, (path, result.content)
    assert outbox.actions == []
    assert not list((ctx.data_dir / "outgoing").rglob("*.*")), "nothing refused was copied out"


async def test_at_most_the_configured_number_of_files(registry, make_ctx, outbox):
    ctx = dataclasses.replace(make_ctx(), outgoing=Outgoing(max_files=2))
    for name in ("1.txt", "2.txt", "3.txt"):
        _write(ctx, name, b"x")
    results = [await registry.execute("send_file", {"path": n}, ctx) for n in ("1.txt", "2.txt", "3.txt")]
    assert [r.is_error for r in results] == [False, False, True]
    assert "at most 2 files" in results[2].content
    assert len(outbox.actions) == 2


async def test_only_the_owner_may_send_files(registry, make_ctx, outbox):
    ctx = make_ctx(owner=False)
    _write(ctx, "a.txt", b"x")
    result = await registry.execute("send_file", {"path": "a.txt"}, ctx)
    assert result.is_error and "only for the owner" in result.content
    assert outbox.actions == []


def test_deleting_a_sent_copy_touches_nothing_outside_the_outgoing_folder(tmp_path):
    data = tmp_path / "data"
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    folder = data / "outgoing" / "telegram_1" / "abc"
    folder.mkdir(parents=True)
    os.symlink(outside, folder / "link.txt")
    (folder / "sent.txt").write_text("x")
    assert not discard(data, "outgoing/telegram_1/abc/link.txt") and outside.read_text() == "keep me"
    for hostile in ("outgoing/../../precious.txt", "workspaces/telegram_1/a.txt", "/etc/hostname"):
        assert not discard(data, hostile)
    assert discard(data, "outgoing/telegram_1/abc/sent.txt") and not (folder / "sent.txt").exists()
    assert prune(data, keep=set(), finished={"outgoing/telegram_1/abc/link.txt"}, older_than=0) == 0
    assert outside.read_text() == "keep me"
