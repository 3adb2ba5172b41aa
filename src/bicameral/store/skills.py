"""Skills in the Agent Skills format: `<name>/SKILL.md` (YAML frontmatter with `name` and `description`, then the
instructions; optional files beside it), shipped in the package and kept by the owner in `<data dir>/skills/`.

Read when first asked for, and again whenever a folder or a SKILL.md changed, so the owner can add one while the
assistant runs. Each is validated on load; a bad one is left out with its reason (`problems()`, which /audit shows)
and the rest keep working. The owner's skill wins over a shipped one of the same name; `skills_disabled`
(plugins.json) hides one. Every file is opened only if it really lies inside its skill's folder (symlinks followed)
and is no larger than the limit, checked before a byte is read.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bicameral.folders import resolve_under

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).resolve().parents[1] / "prompts" / "skills"
SKILL_FILE = "SKILL.md"
# The spec's name: lowercase letters, digits and single hyphens inside, at most 64 characters.
NAME = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){0,63}")
MAX_FILE_BYTES = 256 * 1024  # SKILL.md or any file beside it
MAX_FRONTMATTER_CHARS = 16 * 1024
MAX_DESCRIPTION_CHARS = 1024
MAX_SKILLS = 200  # per folder; more are left out with a note
MAX_LISTED_FILES = 50


class SkillError(Exception):
    """A skill or one of its files cannot be used; the message says why, for the model or the owner."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path
    origin: Literal["shipped", "owner"]
    instructions: str


@dataclass(frozen=True)
class _Loaded:
    signature: tuple[object, ...]
    skills: dict[str, Skill]
    problems: tuple[str, ...]


class Skills:
    """The skills on offer: shipped ones and the owner's, validated, the owner's winning on a name clash."""

    def __init__(self, owner_root: Path, shipped_root: Path = SHIPPED, hidden: Iterable[str] = ()) -> None:
        self._roots: tuple[tuple[Path, Literal["shipped", "owner"]], ...] = ((shipped_root, "shipped"), (owner_root, "owner"))
        self._hidden = frozenset(hidden)
        self._loaded: _Loaded | None = None

    @property
    def owner_root(self) -> Path:
        return self._roots[1][0]

    def hide(self, names: Iterable[str]) -> None:
        """The owner's `skills_disabled`: these are neither listed nor readable nor run."""
        self._hidden = frozenset(names)
        self._loaded = None

    def all(self) -> list[Skill]:
        """Every usable skill, by name."""
        skills = self._current().skills
        return [skills[name] for name in sorted(skills)]

    def get(self, name: str) -> Skill | None:
        return self._current().skills.get(name)

    def problems(self) -> list[str]:
        """One line per skill left out, and why."""
        return list(self._current().problems)

    def require(self, name: str) -> Skill:
        """The skill called `name`, or a SkillError saying there is none (a name that is a path is none)."""
        found = self.get(name) if NAME.fullmatch(name) else None
        if found is None:
            known = ", ".join(s.name for s in self.all()) or "none"
            raise SkillError(f"there is no skill named {name[:80]!r}; the skills are: {known}")
        return found

    def read(self, name: str, path: str = SKILL_FILE) -> str:
        """A file of skill `name` (its SKILL.md unless another path inside its folder is given)."""
        skill = self.require(name)
        if not path or "\x00" in path or Path(path).is_absolute():
            raise SkillError(f"{path[:80]!r} is not a path inside the skill {name}; give one like 'SKILL.md'")
        try:
            real = resolve_under(skill.folder, skill.folder / path)
        except (OSError, RuntimeError) as exc:
            raise SkillError(f"{path[:80]!r} in the skill {name} cannot be read ({exc})") from None
        if real is None:
            raise SkillError(f"{path[:80]!r} is outside the skill {name}'s folder")
        text = _read_text(real, f"{name}/{path[:80]}")
        if Path(path) == Path(SKILL_FILE):
            beside = _files_beside(skill.folder)
            if beside:
                text += "\n\n(Files beside it, read with skill_read and their path: " + ", ".join(beside) + ")"
        return text

    # --- loading ---

    def _current(self) -> _Loaded:
        signature = tuple(_signature(root) for root, _ in self._roots)
        if self._loaded is None or self._loaded.signature != signature:
            self._loaded = self._load(signature)
        return self._loaded

    def _load(self, signature: tuple[object, ...]) -> _Loaded:
        skills: dict[str, Skill] = {}
        problems: list[str] = []
        for root, origin in self._roots:
            for folder in _folders(root, problems):
                try:
                    skill = _load_one(root, folder, origin)
                except SkillError as exc:
                    shown = f"{folder.name[:80]!r} ({'shipped' if origin == 'shipped' else root})"
                    problems.append(f"skill {shown}: {exc}")
                    log.warning("skill %s left out: %s", shown, exc)
                    continue
                skills[skill.name] = skill  # the owner's folder comes second: theirs wins
        for name in sorted(self._hidden):
            if skills.pop(name, None) is None:
                problems.append(f"skills_disabled names {name!r}, which is no skill")
        return _Loaded(signature, skills, tuple(problems))


def _signature(root: Path) -> object:
    """What changes when a skill is added, removed or edited: each folder's SKILL.md size and time."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)[: MAX_SKILLS + 1]
    except OSError:
        return None
    found: list[object] = []
    for entry in entries:
        try:
            info = os.stat(Path(entry.path) / SKILL_FILE)
            found.append((entry.name, info.st_mtime_ns, info.st_size))
        except OSError:
            found.append((entry.name, None))
    return tuple(found)


def _folders(root: Path, problems: list[str]) -> list[Path]:
    """The skill folders under `root` (not hidden files, not loose files), at most MAX_SKILLS."""
    try:
        entries = sorted((e for e in os.scandir(root) if not e.name.startswith(".") and e.is_dir()), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(f"the skills folder {root} cannot be read ({exc.strerror})")
        return []
    if len(entries) > MAX_SKILLS:
        problems.append(f"{root} holds {len(entries)} skill folders; only the first {MAX_SKILLS} are read")
    return [Path(e.path) for e in entries[:MAX_SKILLS]]


def _load_one(root: Path, folder: Path, origin: Literal["shipped", "owner"]) -> Skill:
    if not NAME.fullmatch(folder.name):
        raise SkillError("a skill's folder name must be lowercase letters, digits and single hyphens, at most 64")
    try:
        real_folder = resolve_under(root, folder)
        real = resolve_under(folder, folder / SKILL_FILE) if real_folder is not None else None
    except (OSError, RuntimeError) as exc:
        raise SkillError(f"its folder cannot be read ({exc})") from None
    if real_folder is None:
        raise SkillError("its folder is a link to somewhere outside the skills folder")
    if real is None:
        raise SkillError(f"its {SKILL_FILE} is a link to somewhere outside its folder")
    text = _read_text(real, SKILL_FILE)
    meta, instructions = _frontmatter(text)
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise SkillError("its frontmatter has no `name`")
    if name != folder.name:
        raise SkillError(f"its name {name[:80]!r} is not its folder's name (a skill's name is a plain name, not a path)")
    if not isinstance(description, str) or not description.strip():
        raise SkillError("its frontmatter has no `description` (what it does and when to use it)")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillError(f"its description is {len(description)} characters; at most {MAX_DESCRIPTION_CHARS}")
    if not instructions.strip():
        raise SkillError("it has no instructions after the frontmatter")
    return Skill(name, " ".join(description.split()), real_folder, origin, instructions.strip())


def _read_text(path: Path, shown: str) -> str:
    """A file's text, refused by its size before it is read, and refused when it is not UTF-8 text."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise SkillError(f"{shown} is not a file")
        if size > MAX_FILE_BYTES:
            raise SkillError(f"{shown} is {_size(size)}; a skill's file may be at most {_size(MAX_FILE_BYTES)}")
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SkillError(f"there is no {shown}") from None
    except OSError as exc:
        raise SkillError(f"{shown} cannot be read ({exc.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise SkillError(f"{shown} grew past {_size(MAX_FILE_BYTES)} while being read")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise SkillError(f"{shown} is not UTF-8 text") from None


def _frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """The YAML between the opening `---` line and the next one, and the instructions after it."""
    import yaml  # loaded with the first skill: an idle assistant never needs it

    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{SKILL_FILE} must begin with YAML frontmatter between '---' lines (name, description)")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise SkillError("its frontmatter has no closing '---' line")
    block = "".join(lines[1:end])
    if len(block) > MAX_FRONTMATTER_CHARS:
        raise SkillError(f"its frontmatter is {len(block)} characters; at most {MAX_FRONTMATTER_CHARS}")
    try:
        meta = yaml.safe_load(block)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "unreadable"
        raise SkillError(f"its frontmatter is not valid YAML{where} ({problem})") from None
    if not isinstance(meta, dict):
        raise SkillError("its frontmatter is not a set of `key: value` lines")
    return meta, "".join(lines[end + 1 :])


def _files_beside(folder: Path) -> list[str]:
    """The other files of a skill (relative paths, links not followed), at most MAX_LISTED_FILES."""
    found: list[str] = []
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            rel = (Path(parent) / name).relative_to(folder).as_posix()
            if rel != SKILL_FILE and not name.startswith("."):
                found.append(rel)
            if len(found) >= MAX_LISTED_FILES:
                return found
    return found


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n // 1024} KB"
