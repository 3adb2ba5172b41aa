"""Memory files and their index: real files under a data dir, real SQLite FTS5."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from bicameral.store import Stores
from bicameral.store.memory_files import Entry
from bicameral.store.memory_scopes import GLOBAL, chat_scope, reach_for, user_scope

ADA = user_scope("telegram:1001")
BOB = user_scope("telegram:2002")
TEAM = chat_scope("telegram:-100200")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def stores(data: Path):
    opened = Stores.open(data / "bicameral.db")
    yield opened
    opened.close()


def _texts(facts) -> list[str]:
    return [f.text for f in facts]


def test_a_fact_is_kept_in_a_markdown_file_and_survives_reopening(data: Path, stores: Stores) -> None:
    kept = stores.memory.remember(ADA, "My sister's birthday is 3 May", importance=0.8)
    assert kept.outcome == "new"
    text = (data / "memory" / "users" / "telegram~1001.md").read_text()
    assert text.startswith("---\n") and "scope: user:telegram:1001" in text
    assert f"- My sister's birthday is 3 May <!-- id={kept.fact.id}" in text
    stores.close()
    again = Stores.open(data / "bicameral.db")
    try:
        assert _texts(again.memory.recall("when is the birthday of my sister", [ADA])) == ["My sister's birthday is 3 May"]
    finally:
        again.close()


def test_a_repeat_does_not_duplicate(stores: Stores) -> None:
    first = stores.memory.remember(ADA, "I'm vegetarian")
    second = stores.memory.remember(ADA, "i'm  Vegetarian.")
    assert second.outcome == "repeat" and second.fact.id == first.fact.id
    assert _texts(stores.memory.all([ADA])) == ["I'm vegetarian"]


def test_a_contradicting_fact_replaces_the_old_which_stays_in_history(data: Path, stores: Stores) -> None:
    old = stores.memory.remember(ADA, "I live in Berlin", key="home city")
    new = stores.memory.remember(ADA, "I live in Lisbon now", key="Home  City")
    assert new.outcome == "replaced" and new.replaced is not None and new.replaced.id == old.fact.id
    assert _texts(stores.memory.recall("where do I live", [ADA])) == ["I live in Lisbon now"]
    text = (data / "memory" / "users" / "telegram~1001.md").read_text()
    history = text.split("## History", 1)[1]
    assert "I live in Berlin" in history and f"replaced_by_{new.fact.id}" in history
    assert "I live in Lisbon now" not in history


def test_replacing_by_id(stores: Stores) -> None:
    old = stores.memory.remember(ADA, "The staging box is staging-2")
    new = stores.memory.remember(ADA, "The staging box is staging-3", replaces=old.fact.id)
    assert new.outcome == "replaced"
    assert _texts(stores.memory.all([ADA])) == ["The staging box is staging-3"]
    with pytest.raises(ValueError, match="no fact 'nope'"):
        stores.memory.remember(ADA, "x", replaces="nope")


def test_forget_by_id_and_by_words_removes_it_from_file_index_and_history(data: Path, stores: Stores) -> None:
    diet = stores.memory.remember(ADA, "I'm vegetarian", key="diet")
    stores.memory.remember(ADA, "I'm vegan since March", key="diet")
    stores.memory.remember(ADA, "My cat is called Pixel")
    gone = stores.memory.forget("vegan", [ADA])
    assert _texts(gone) == ["I'm vegan since March"]
    text = (data / "memory" / "users" / "telegram~1001.md").read_text()
    assert "vegan" not in text and "vegetarian" not in text  # its older version went with it
    assert stores.memory.recall("vegan vegetarian diet", [ADA]) == []
    assert stores.memory.index.get(diet.fact.id) is None
    cat = stores.memory.recall("cat", [ADA])[0]
    assert _texts(stores.memory.forget(cat.id, [ADA])) == ["My cat is called Pixel"]
    assert stores.memory.all([ADA]) == []


def test_forget_does_not_reach_another_scope(stores: Stores) -> None:
    bob = stores.memory.remember(BOB, "Bob's PIN hint is the dog's name")
    assert stores.memory.forget(bob.fact.id, [ADA, GLOBAL]) == []
    assert stores.memory.forget("PIN hint", [ADA]) == []
    assert _texts(stores.memory.all([BOB])) == ["Bob's PIN hint is the dog's name"]


def test_scopes_do_not_mix(stores: Stores) -> None:
    stores.memory.remember(ADA, "Ada's flight code is ZX81")
    stores.memory.remember(TEAM, "The team flight budget is 500 EUR")
    stores.memory.remember(GLOBAL, "Flights are booked through the travel desk")
    assert sorted(_texts(stores.memory.recall("flight", [BOB, GLOBAL]))) == ["Flights are booked through the travel desk"]
    assert "Ada's flight code is ZX81" not in _texts(stores.memory.recall("flight", [TEAM, GLOBAL]))


def test_a_hand_edited_file_is_picked_up_on_the_next_read(data: Path, stores: Stores) -> None:
    kept = stores.memory.remember(ADA, "I drink my coffee black")
    path = data / "memory" / "users" / "telegram~1001.md"
    text = path.read_text().replace("I drink my coffee black", "I drink my coffee with oat milk")
    path.write_text(text + "\nSome notes I typed myself about the piano lessons on Tuesday.\n")
    assert _texts(stores.memory.recall("coffee", [ADA])) == ["I drink my coffee with oat milk"]
    assert stores.memory.recall("coffee", [ADA])[0].id == kept.fact.id  # the id in the comment is kept
    assert _texts(stores.memory.recall("piano", [ADA])) == ["Some notes I typed myself about the piano lessons on Tuesday."]
    notes = data / "memory" / "notes"
    notes.mkdir()
    (notes / "house.md").write_text("---\ntitle: House rules\n---\n# House\n\n- The wifi password is on the fridge\n")
    assert _texts(stores.memory.recall("wifi", [GLOBAL])) == ["The wifi password is on the fridge"]
    (notes / "house.md").unlink()
    assert stores.memory.recall("wifi", [GLOBAL]) == []


def test_a_write_changes_only_its_own_lines(data: Path, stores: Stores) -> None:
    path = data / "memory" / "users" / "telegram~1001.md"
    path.parent.mkdir(parents=True)
    mine = "---\ntitle: Ada, written by hand\n---\n\nFree text I wrote.\n\n* a bullet of mine\n\n## Later\n\nmore of my words\n"
    path.write_text(mine)
    kept = stores.memory.remember(ADA, "Ada takes the 8:15 train")
    text = path.read_text()
    assert "Ada takes the 8:15 train" in text
    assert [line for line in text.splitlines() if "8:15" not in line] == mine.splitlines()
    stores.memory.forget(kept.fact.id, [ADA])
    assert path.read_text() == mine


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bad-frontmatter.md", "---\ntitle: [unclosed\n---\n- hidden fact one\n", "frontmatter is not valid YAML"),
        ("never-closed.md", "---\ntitle: x\n- hidden fact two\n", "never closed"),
        ("binary.md", "PNG\x00\x01\x02 hidden fact three", "binary"),
        ("huge.md", "- hidden fact four " + "x" * 300_000, "byte limit"),
    ],
)
def test_a_broken_file_is_logged_and_skipped_while_the_rest_works(
    data: Path, stores: Stores, caplog, name: str, content: str, reason: str
) -> None:
    caplog.set_level(logging.WARNING)
    stores.memory.remember(GLOBAL, "The office opens at nine")
    notes = data / "memory" / "notes"
    notes.mkdir()
    (notes / name).write_bytes(content.encode("utf-8"))
    assert _texts(stores.memory.recall("office opens", [GLOBAL])) == ["The office opens at nine"]
    assert stores.memory.recall("hidden fact", [GLOBAL]) == []
    assert any(name in r.getMessage() and reason in r.getMessage() for r in caplog.records)
    broken = stores.memory.stats([GLOBAL]).broken
    assert [p for p, _ in broken] == [f"notes/{name}"]
    caplog.clear()
    stores.memory.recall("office", [GLOBAL])
    assert not caplog.records  # logged once per change, not on every read


def test_a_broken_scope_file_is_never_overwritten(data: Path, stores: Stores) -> None:
    path = data / "memory" / "users" / "telegram~1001.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nbroken: [\n---\n- my own words\n")
    with pytest.raises(ValueError, match=r"cannot be read .* won't overwrite it"):
        stores.memory.remember(ADA, "new fact")
    assert path.read_text() == "---\nbroken: [\n---\n- my own words\n"


def test_scope_names_become_safe_file_names_inside_the_root(data: Path, stores: Stores) -> None:
    for hostile in ("../../etc/passwd", "/abs/path", "..", "a/b\\c", "\x00nul", "ünï:cødé"):
        kept = stores.memory.remember(user_scope(hostile), f"fact for {hostile!r}")
        files = [p for p in (data / "memory").rglob("*.md")]
        assert all(p.resolve().is_relative_to((data / "memory").resolve()) for p in files)
        assert kept.fact.scope == user_scope(hostile)
        assert _texts(stores.memory.recall("fact", [user_scope(hostile)])) == [f"fact for {hostile!r}"]
    assert not (data.parent / "etc").exists()


def test_a_symlink_out_of_the_root_is_not_followed(tmp_path: Path, data: Path, stores: Stores) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("- the launch code is 0000\n")
    root = data / "memory"
    (root / "notes").mkdir(parents=True)
    os.symlink(secret, root / "notes" / "link.md")
    assert stores.memory.recall("launch code", [GLOBAL]) == []
    target = root / "users" / "telegram~1001.md"
    target.parent.mkdir()
    os.symlink(secret, target)
    with pytest.raises(ValueError, match="symlink"):
        stores.memory.remember(ADA, "should not land in the secret file")
    assert secret.read_text() == "- the launch code is 0000\n"


def test_injection_picks_matches_first_then_importance_within_the_budget(stores: Stores) -> None:
    stores.memory.remember(ADA, "I'm vegetarian", importance=0.9)
    stores.memory.remember(ADA, "My sister's birthday is 3 May", importance=0.3)
    for i in range(30):
        stores.memory.remember(ADA, f"Trivia number {i} about nothing in particular", importance=0.1)
    chosen = stores.memory.relevant("when is my sister's birthday?", [ADA], budget_tokens=30)
    assert _texts(chosen)[:2] == ["My sister's birthday is 3 May", "I'm vegetarian"]
    assert sum(len(f.text) // 4 + 8 for f in chosen) <= 30
    assert stores.memory.relevant("anything", [ADA], budget_tokens=0) == []


def test_reach_rules() -> None:
    dm = reach_for("telegram:1001", channel="telegram", sender_id="1001", private=True, own_lane=True, owner=False)
    assert dm.readable == (GLOBAL, ADA)
    own_lane = reach_for("telegram:-100200", channel="telegram", sender_id="1001", private=False, own_lane=True, owner=False)
    assert own_lane.readable == (GLOBAL, ADA, TEAM)
    shared = reach_for("telegram:-100200", channel="telegram", sender_id="1001", private=False, own_lane=False, owner=False)
    assert shared.readable == (GLOBAL, TEAM)
    assert shared.forgettable == (TEAM,)
    with pytest.raises(ValueError, match="private facts"):
        shared.writable("me")
    with pytest.raises(ValueError, match="only the owner"):
        dm.writable("global")
    with pytest.raises(ValueError, match="not a group"):
        dm.writable("group")
    assert dm.writable(None) == ADA and shared.writable(None) == TEAM


def test_a_credential_is_never_kept(data: Path, stores: Stores) -> None:
    kept = stores.memory.remember(ADA, "My GitHub token is ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in kept.fact.text
    assert "ghp_abcdefghij" not in (data / "memory" / "users" / "telegram~1001.md").read_text()


def test_a_committed_folder_is_searched_but_never_written(tmp_path: Path, data: Path) -> None:
    committed = tmp_path / "repo" / "memories"
    (committed / "users").mkdir(parents=True)
    (committed / "users" / "telegram~1001.md").write_text("---\nname: Ada\n---\n- Ada's passport number ends in 42\n")
    (committed / "global.md").write_text("- The house boiler is serviced every October\n")
    before = {p: p.read_text() for p in committed.rglob("*.md")}
    opened = Stores.open(data / "bicameral.db", committed_memory=committed)
    try:
        assert _texts(opened.memory.recall("passport", [ADA])) == ["Ada's passport number ends in 42"]
        assert opened.memory.recall("passport", [BOB, GLOBAL]) == []
        opened.memory.remember(ADA, "Ada's passport expires in 2031")
        assert len(opened.memory.recall("passport", [ADA])) == 2
        assert opened.memory.forget("passport", [ADA, GLOBAL])[0].text == "Ada's passport expires in 2031"
        assert _texts(opened.memory.recall("passport", [ADA])) == ["Ada's passport number ends in 42"]
        assert opened.memory.forget("boiler", [GLOBAL]) == []
        assert {p: p.read_text() for p in committed.rglob("*.md")} == before
    finally:
        opened.close()


def test_a_hand_edit_made_just_before_a_write_is_kept(data: Path, stores: Stores) -> None:
    stores.memory.remember(ADA, "Ada plays the cello")
    path = data / "memory" / "users" / "telegram~1001.md"
    path.write_text(path.read_text() + "- Ada's cello teacher is Mr. Ito\n")  # no read happens in between
    stores.memory.remember(ADA, "Ada practises on Sundays")
    text = path.read_text()
    assert "Ada plays the cello" in text and "Mr. Ito" in text and "Sundays" in text


@pytest.mark.parametrize(
    "text",
    [
        "fact with a fake comment <!-- id=h0000 importance=1 key=diet -->",
        "line one\n## History\n- smuggled line",
        "---\nscope: global\n---",
        "# looks like a heading",
        "trailing comment closer --> and = signs key=x",
    ],
)
def test_hostile_fact_text_stays_one_fact_in_its_own_scope(data: Path, stores: Stores, text: str) -> None:
    kept = stores.memory.remember(ADA, text, key="odd key = value")
    again = Stores.open(data / "fresh.db")  # a new index beside the same memory folder reads the file from scratch
    try:
        facts = again.memory.all([ADA])
        assert [f.id for f in facts] == [kept.fact.id]
        assert facts[0].key == kept.fact.key and facts[0].scope == ADA
        assert again.memory.all([GLOBAL]) == []
    finally:
        again.close()


@pytest.mark.parametrize(
    ("broken", "repaired"),
    [
        (b"- The bins go out on Thurs\x00day", "The bins go out on Thursday"),  # a NUL
        (b"- Caf\xe9 Nero opens at 7", "Caf\ufffd Nero opens at 7"),  # Latin-1 typed by hand: not UTF-8
        (b"- The key is under the \x1b[2Jmat\x0b\x0c", "The key is under the [2Jmat"),  # control codes
        (b"- half a bullet <!-- id=", "half a bullet <!-- id="),  # a comment never closed
    ],
)
def test_one_broken_entry_never_locks_its_scope(
    data: Path, stores: Stores, caplog, broken: bytes, repaired: str
) -> None:
    """A line that is not clean text costs only itself: the scope's other facts are recalled, new ones kept,
    and the broken line goes back to the file exactly as it was found."""
    caplog.set_level(logging.WARNING)
    stores.memory.remember(TEAM, "The team standup is at 9:30")
    stores.memory.remember(TEAM, "The team wiki lives at wiki.example.org")
    path = data / "memory" / "chats" / "telegram~-100200.md"
    path.write_bytes(path.read_bytes() + broken + b"\n")

    assert _texts(stores.memory.recall("standup", [TEAM])) == ["The team standup is at 9:30"]
    assert repaired in _texts(stores.memory.all([TEAM]))
    assert stores.memory.stats([TEAM]).broken == []
    kept = stores.memory.remember(TEAM, "The team retro is on Fridays")
    assert kept.outcome == "new"
    assert _texts(stores.memory.recall("retro", [TEAM])) == ["The team retro is on Fridays"]
    assert broken in path.read_bytes().split(b"\n")  # untouched by the write
    stores.memory.forget(kept.fact.id, [TEAM])
    assert broken in path.read_bytes().split(b"\n")


def test_a_repaired_line_is_logged_once_per_change(data: Path, stores: Stores, caplog) -> None:
    caplog.set_level(logging.WARNING)
    stores.memory.remember(TEAM, "The team standup is at 9:30")
    path = data / "memory" / "chats" / "telegram~-100200.md"
    path.write_bytes(path.read_bytes() + b"- bad\x00line\n")
    stores.memory.recall("standup", [TEAM])
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and "chats/telegram~-100200.md" in logged[0] and "line 8" in logged[0]
    caplog.clear()
    stores.memory.recall("standup", [TEAM])
    assert not caplog.records


def test_a_fact_with_control_codes_or_a_lone_surrogate_is_kept_clean(data: Path, stores: Stores) -> None:
    """Whoever calls remember (a tool, the front, extraction), nothing unwritable reaches a file."""
    kept = stores.memory.remember(TEAM, "The door code is 12\x0034\u202e\ud800")
    assert kept.fact.text == "The door code is 1234\ufffd"
    text = (data / "memory" / "chats" / "telegram~-100200.md").read_bytes()
    assert b"\x00" not in text and "The door code is 1234\ufffd".encode() in text


def test_an_entry_the_index_cannot_take_costs_only_itself(stores: Stores, caplog) -> None:
    caplog.set_level(logging.WARNING)
    entries = [
        Entry("h1", "The team standup is at 9:30"), Entry("h2", "half a pair \ud800"), Entry("h3", "The retro is on Friday"),
    ]
    skipped = stores.memory.index.replace_file("chats/x.md", TEAM, 1, 1, entries, 0.0)
    assert skipped == []
    assert sorted(f.id for f in stores.memory.index.top([TEAM], 10)) == ["h1", "h3"]
    assert any("h2 not indexed" in r.getMessage() for r in caplog.records)
