"""Instruction files: read before overwrite, a timestamped backup for every edit, undo."""

from __future__ import annotations

from pathlib import Path

import pytest

from bicameral.store.instructions import Instructions, InstructionsRefused

CHAT = "telegram:-100200"


def test_a_new_file_needs_no_read_and_an_existing_one_does(tmp_path: Path) -> None:
    files = Instructions(tmp_path / "instructions")
    assert files.write("chat", CHAT, "Answer in German.") is None
    with pytest.raises(InstructionsRefused, match="read the current instructions first"):
        Instructions(tmp_path / "instructions").write("chat", CHAT, "Answer in French.")  # a restart forgets reads
    assert [i.text for i in files.for_chat(CHAT)] == ["Answer in German."]


def test_a_file_changed_since_it_was_read_must_be_read_again(tmp_path: Path) -> None:
    files = Instructions(tmp_path / "instructions")
    path = files.path("global", CHAT)
    path.parent.mkdir(parents=True)
    path.write_text("Be brief.\n")
    assert files.read("global", CHAT) == "Be brief.\n"
    path.write_text("Be brief. Never use emoji.\n")  # a person edits it meanwhile
    with pytest.raises(InstructionsRefused, match="changed since you read"):
        files.write("global", CHAT, "Be brief. Use emoji.")
    assert path.read_text() == "Be brief. Never use emoji.\n"


def test_every_edit_is_backed_up_and_can_be_undone_and_redone(tmp_path: Path) -> None:
    ticks = iter(range(1_700_000_000, 1_700_000_100))
    files = Instructions(tmp_path / "instructions", clock=lambda: float(next(ticks)))
    files.write("global", CHAT, "Persona: calm.")
    files.read("global", CHAT)
    backup = files.write("global", CHAT, "Persona: cheerful.")
    assert backup is not None and backup.read_text() == "Persona: calm.\n" and "20231114T" in backup.name
    assert files.undo("global", CHAT) == "Persona: calm.\n"
    assert [i.text for i in files.for_chat("telegram:1")] == ["Persona: calm."]  # global applies everywhere
    assert files.undo("global", CHAT) == "Persona: cheerful.\n"  # the undo was itself backed up
    files.undo("global", CHAT)
    with pytest.raises(InstructionsRefused, match="no earlier version"):
        Instructions(tmp_path / "other").undo("chat", CHAT)
