"""One safe file name and one "is this path inside that folder", for every place that names or checks a file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from bicameral.folders import MAX_NAME_CHARS, resolve_under, safe_name
from bicameral.sandbox.workspace import add_to_workspace, hand_to_sandbox_user, workspace_for


def _sandbox_safe_name_before(name: str, fallback: str = "file") -> str:
    """The sandbox's own rule before there was one: separators kept as `_`, the last 120 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
    return cleaned[-120:] or fallback


# What the sandbox names after: chat keys (workspaces, outgoing folders) and file names up to the common length.
SANDBOX_NAMES = [
    ("telegram:4242", "chat"),
    ("telegram:-1001234567890", "chat"),
    ("terminal:local", "chat"),
    ("", "chat"),
    ("report.pdf", "file"),
    ("my report (final).pdf", "file"),
    ("Ünïcödé naïve.txt", "file"),
    (".hidden", "file"),
    ("...", "file"),
    ("x" * MAX_NAME_CHARS, "file"),
]


@pytest.mark.parametrize(("name", "fallback"), SANDBOX_NAMES)
def test_the_sandbox_names_its_folders_and_files_as_it_did(name: str, fallback: str) -> None:
    assert safe_name(name, fallback) == _sandbox_safe_name_before(name, fallback)


def test_the_stricter_rule_where_the_two_differed() -> None:
    # The last part of a path only (the sandbox kept `a_b`), and at most 80 characters with the extension kept
    # (the sandbox kept the last 120).
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("..\\..\\boot.ini") == "boot.ini"
    assert safe_name("notes/") == "file"
    long = safe_name("x" * 200 + ".pdf")
    assert len(long) == MAX_NAME_CHARS and long.endswith(".pdf")
    assert safe_name("y" * 200) == "y" * MAX_NAME_CHARS
    assert safe_name("z" * 200 + ".averyveryverylongextension") == "z" * MAX_NAME_CHARS


@pytest.mark.parametrize("name", ["a b", "ü", "..", "a/b", "x" * 300 + ".tar.gz", "telegram:1", "\x00\n", "-"])
def test_a_safe_name_is_one_harmless_component_and_stays_itself(name: str) -> None:
    once = safe_name(name)
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", once) and len(once) <= MAX_NAME_CHARS
    assert safe_name(once) == once  # what the sandbox checks a workspace's own name against


def test_a_workspace_is_still_handed_over_under_its_own_name(tmp_path: Path) -> None:
    workspace = workspace_for(tmp_path, "telegram:-1001234567890")
    assert workspace.name == "telegram_-1001234567890"
    if os.geteuid() == 0:
        hand_to_sandbox_user(tmp_path / "workspaces", workspace)  # refused if safe_name changed the name


def test_a_received_file_keeps_its_name_in_the_workspace(tmp_path: Path) -> None:
    source = tmp_path / "incoming.bin"
    source.write_bytes(b"hi")
    copy = add_to_workspace(tmp_path, "telegram:1", source, "Quarterly report (draft).xlsx")
    assert copy.name == "Quarterly_report__draft_.xlsx" and copy.read_bytes() == b"hi"


def test_resolve_under_follows_links_and_answers_where_the_path_really_is(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "file.txt").write_text("x")
    outside = tmp_path / "secret.txt"
    outside.write_text("no")
    (root / "out").symlink_to(outside)
    (root / "in").symlink_to(root / "sub")
    (tmp_path / "alias").symlink_to(root)

    assert resolve_under(root, root) == root.resolve()
    assert resolve_under(root, root / "sub" / "file.txt") == (root / "sub" / "file.txt").resolve()
    assert resolve_under(root, root / "in" / "file.txt") == (root / "sub" / "file.txt").resolve()
    assert resolve_under(root, root / "missing" / "later.txt") == root.resolve() / "missing" / "later.txt"
    assert resolve_under(tmp_path / "alias", root / "sub") == (root / "sub").resolve()  # the root's own link too
    assert resolve_under(root, root / "out") is None
    assert resolve_under(root, root / ".." / "secret.txt") is None
    assert resolve_under(root, root / "/etc/passwd") is None  # an absolute part replaces the root
    assert resolve_under(root / "sub", root) is None
    assert resolve_under(root, tmp_path / "datafile") is None  # a sibling whose name starts the same


def test_resolve_under_raises_on_a_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises((RuntimeError, OSError)):
        resolve_under(tmp_path, tmp_path / "a" / "x")
