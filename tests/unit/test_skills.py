"""Skills: loaded and validated from the package and the owner's folder, a bad one left out with its reason, the
owner's winning on a name clash, `skills_disabled` hiding one, files read only inside a skill's folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bicameral.errors import PluginsError
from bicameral.mcp.plugins import load_plugins
from bicameral.store import Stores
from bicameral.store.skills import MAX_FILE_BYTES, SHIPPED, SkillError, Skills
from bicameral.tools.base import ToolContext
from bicameral.tools.reminders import CreateArgs, CreateSchedule
from bicameral.tools.skills import ReadArgs, SkillList, SkillRead


def write_skill(root: Path, folder: str, text: str | None = None, *, name: str | None = None) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = f"---\nname: {name or folder}\ndescription: Does {folder} things.\n---\n# {folder}\n\nStep one of {folder}.\n"
    (path / "SKILL.md").write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    root = tmp_path / "shipped"
    write_skill(root, "alpha")
    write_skill(root, "beta")
    return root


@pytest.fixture
def owner(tmp_path: Path) -> Path:
    return tmp_path / "data" / "skills"


def test_the_shipped_skills_load_without_problems() -> None:
    skills = Skills(Path("/nonexistent"), SHIPPED)
    assert [s.name for s in skills.all()] == ["morning-briefing", "self-reflection"]
    assert skills.problems() == []
    assert "## 5. Ask the owner" in skills.require("self-reflection").instructions
    assert not skills.require("self-reflection").instructions.startswith("---"), "the frontmatter is not instructions"


def test_skills_load_lazily_and_the_owners_win_a_name_clash(shipped: Path, owner: Path) -> None:
    write_skill(owner, "beta", "---\nname: beta\ndescription: The owner's own beta.\n---\nMine.\n")
    write_skill(owner, "gamma")
    skills = Skills(owner, shipped)
    assert skills._loaded is None, "nothing is read until asked for"
    assert [(s.name, s.origin) for s in skills.all()] == [("alpha", "shipped"), ("beta", "owner"), ("gamma", "owner")]
    assert skills.require("beta").instructions == "Mine."
    assert skills.require("beta").description == "The owner's own beta."


def test_a_skill_added_while_running_is_seen(shipped: Path, owner: Path) -> None:
    skills = Skills(owner, shipped)
    assert [s.name for s in skills.all()] == ["alpha", "beta"]
    write_skill(owner, "delta")
    assert [s.name for s in skills.all()] == ["alpha", "beta", "delta"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("---\nname: broken\ndescription: [unclosed\n---\nDo it.\n", "not valid YAML at line 4 (expected"),
        ("---\nname: broken\ndescription: x: y: z\n---\nDo it.\n", "not valid YAML"),
        ("no frontmatter here\n", "must begin with YAML frontmatter"),
        ("---\nname: broken\ndescription: never closed\n", "no closing '---'"),
        ("---\n- a list\n---\nDo it.\n", "not a set of `key: value` lines"),
        ("---\ndescription: nameless\n---\nDo it.\n", "no `name`"),
        ("---\nname: broken\n---\nDo it.\n", "no `description`"),
        ("---\nname: broken\ndescription: Fine.\n---\n\n", "no instructions"),
        ("---\nname: broken\ndescription: " + "x" * 1100 + "\n---\nDo it.\n", "at most 1024"),
        ("---\nname: ../../etc/passwd\ndescription: A name that is a path.\n---\nDo it.\n", "not its folder's name"),
    ],
    ids=["yaml", "yaml-colons", "no-frontmatter", "unclosed", "list", "no-name", "no-description", "empty",
         "long-description", "name-is-a-path"],
)
def test_a_bad_skill_is_left_out_with_its_reason_and_the_rest_load(
    shipped: Path, owner: Path, text: str, reason: str
) -> None:
    write_skill(owner, "broken", text)
    skills = Skills(owner, shipped)
    assert [s.name for s in skills.all()] == ["alpha", "beta"]
    [problem] = skills.problems()
    assert problem.startswith("skill 'broken' (") and reason in problem, problem


def test_a_folder_named_unlike_a_skill_is_refused(shipped: Path, owner: Path) -> None:
    write_skill(owner, "Bad Name", name="Bad Name")
    skills = Skills(owner, shipped)
    assert [s.name for s in skills.all()] == ["alpha", "beta"]
    assert "lowercase letters, digits and single hyphens" in skills.problems()[0]


def test_a_50_mb_skill_is_refused_by_its_size_before_it_is_read(shipped: Path, owner: Path, monkeypatch) -> None:
    folder = owner / "huge"
    folder.mkdir(parents=True)
    with (folder / "SKILL.md").open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)  # sparse: no disk used
    opened: list[str] = []
    real_open = Path.open

    def watched(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(self.name)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", watched)
    skills = Skills(owner, shipped)
    assert [s.name for s in skills.all()] == ["alpha", "beta"]
    assert skills.problems() == [f"skill 'huge' ({owner}): SKILL.md is 50.0 MB; a skill's file may be at most 256 KB"]
    assert opened.count("SKILL.md") == 2, "only the two good ones were opened"


def test_a_link_out_of_the_skills_folder_is_refused(tmp_path: Path, shipped: Path, owner: Path) -> None:
    outside = write_skill(tmp_path / "elsewhere", "away")
    owner.mkdir(parents=True)
    (owner / "away").symlink_to(outside, target_is_directory=True)
    linked = owner / "linked"
    linked.mkdir()
    (linked / "SKILL.md").symlink_to(outside / "SKILL.md")
    skills = Skills(owner, shipped)
    assert [s.name for s in skills.all()] == ["alpha", "beta"]
    problems = "\n".join(skills.problems())
    assert "'away'" in problems and "outside the skills folder" in problems
    assert "'linked'" in problems and "outside its folder" in problems


def test_skills_disabled_hides_one_and_names_one_that_is_none(shipped: Path, owner: Path) -> None:
    skills = Skills(owner, shipped, hidden=["beta", "nosuch"])
    assert [s.name for s in skills.all()] == ["alpha"]
    with pytest.raises(SkillError, match="no skill named 'beta'"):
        skills.read("beta")
    assert skills.problems() == ["skills_disabled names 'nosuch', which is no skill"]


def test_plugins_json_reads_skills_disabled_and_refuses_a_path(tmp_path: Path) -> None:
    path = tmp_path / "plugins.json"
    path.write_text('{"skills_disabled": ["morning-briefing"]}')
    assert load_plugins(path).skills_disabled == ("morning-briefing",)
    path.write_text('{"skills_disabled": ["../etc"]}')
    with pytest.raises(PluginsError, match="is not a skill name"):
        load_plugins(path)


def test_reading_a_skills_files_stays_inside_its_folder(tmp_path: Path, shipped: Path, owner: Path) -> None:
    folder = write_skill(owner, "kit")
    (folder / "templates").mkdir()
    (folder / "templates" / "day.md").write_text("A template.")
    (tmp_path / "secret.txt").write_text("not yours")
    (folder / "escape.md").symlink_to(tmp_path / "secret.txt")
    (folder / "big.txt").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    skills = Skills(owner, shipped)
    whole = skills.read("kit")
    assert whole.startswith("---\nname: kit") and "templates/day.md" in whole, "SKILL.md, then the files beside it"
    assert skills.read("kit", "templates/day.md") == "A template."
    for path, why in [
        ("../../secret.txt", "outside the skill kit's folder"),
        ("escape.md", "outside the skill kit's folder"),
        (str(tmp_path / "secret.txt"), "is not a path inside the skill kit"),
        ("nothere.md", "there is no kit/nothere.md"),
        ("templates", "is not a file"),
        ("big.txt", "at most 256 KB"),
    ]:
        with pytest.raises(SkillError, match=why):
            skills.read("kit", path)
    for name in ("../kit", "/etc", "KIT"):
        with pytest.raises(SkillError, match="there is no skill named"):
            skills.read(name)


def _ctx(stores: Stores) -> ToolContext:
    async def perform(action):  # type: ignore[no-untyped-def]
        raise AssertionError("nothing is sent")

    return ToolContext(chat="telegram:1", turn_id="t", data_dir=Path("/nonexistent"), perform=perform, stores=stores)


async def test_the_tools_list_read_and_a_schedule_carries_a_checked_skill(tmp_path: Path) -> None:
    stores = Stores.open(tmp_path / "bicameral.db")
    try:
        write_skill(tmp_path / "skills", "tidy-up")
        ctx = _ctx(stores)
        listed = (await SkillList().run(SkillList.args_model(), ctx)).content
        assert "- tidy-up: Does tidy-up things." in listed and "- morning-briefing: " in listed
        assert (await SkillRead().run(ReadArgs(name="tidy-up"), ctx)).content.endswith("Step one of tidy-up.\n")
        refused = await SkillRead().run(ReadArgs(name="../tidy-up"), ctx)
        assert refused.is_error and "no skill named" in refused.content

        unknown = await CreateSchedule().run(CreateArgs(text="morning", in_minutes=60, skill="no-such"), ctx)
        assert unknown.is_error and "no skill named 'no-such'" in unknown.content
        made = await CreateSchedule().run(CreateArgs(text="my morning", cron="0 7 * * *", skill="morning-briefing"), ctx)
        assert not made.is_error and made.content.endswith("running the skill morning-briefing."), made.content
        [schedule] = stores.schedules.live()
        assert (schedule.kind, schedule.skill, schedule.body) == ("task", "morning-briefing", "my morning")
        fire = stores.schedules.fire(schedule, now=time.time(), next_due=None)
        assert fire is not None and fire.skill == "morning-briefing"
        assert stores.schedules.pending_fires()[0].skill == "morning-briefing", "kept with the fire across a restart"
    finally:
        stores.close()


def test_an_unreadable_skills_folder_is_one_problem(tmp_path: Path, shipped: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    owner = tmp_path / "locked"
    owner.mkdir()
    owner.chmod(0)
    try:
        skills = Skills(owner, shipped)
        assert [s.name for s in skills.all()] == ["alpha", "beta"]
        assert "cannot be read" in skills.problems()[0]
    finally:
        owner.chmod(0o700)
