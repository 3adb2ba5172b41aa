"""Only the wiring reads `Settings`: every other module is handed the few values it uses (see docs/architecture.md).

This reads the code like test_layers.py does: every import at any depth, deferred and TYPE_CHECKING ones included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bicameral
from tests.architecture.source import imported_module

SRC = Path(bicameral.__file__).parent

# config.py defines Settings; the app package builds every component from it (configs.py and voice.py the values,
# wiring.py, chambers.py, workers.py, data.py, models.py, console.py and backups.py the parts they start); the command
# line loads it, `doctor` checks it.
MAY_READ_SETTINGS = {
    "config.py", "app/configs.py", "app/voice.py", "app/wiring.py", "app/data.py", "app/models.py", "app/console.py",
    "app/backups.py", "app/commands.py", "app/dashboard.py", "app/chambers.py", "app/workers.py", "cli.py", "doctor.py",
}


def _package(path: Path) -> str:
    """The package a module's relative imports start from: `bicameral.gate` for gate/gate.py and gate/__init__.py."""
    return ".".join(["bicameral", *path.relative_to(SRC).parent.parts])


def settings_imports(source: str, package: str) -> list[int]:
    """The lines where a module imports `Settings`, or names it through an imported `bicameral.config`."""
    tree = ast.parse(source)
    found: list[int] = []
    config_imported = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = imported_module(node, package)
            names = {alias.name for alias in node.names}
            if module == "bicameral.config" and names & {"Settings", "*"}:
                found.append(node.lineno)
            elif module == "bicameral" and "config" in names:
                config_imported = True
        elif isinstance(node, ast.Import):
            config_imported |= any(alias.name == "bicameral.config" for alias in node.names)
    if config_imported:
        found += [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "Settings"]
    return sorted(found)


def test_only_the_wiring_imports_settings() -> None:
    readers = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() not in MAY_READ_SETTINGS
        for line in settings_imports(path.read_text(encoding="utf-8"), _package(path))
    ]
    assert readers == [], "hand these modules the values they use (built in app/configs.py), not Settings"


def test_the_check_catches_every_way_in() -> None:
    """The checker itself: plain, deferred, TYPE_CHECKING, relative and module-attribute imports are all found."""
    cases = {
        "from bicameral.config import Settings\n": [1],
        "def f():\n    from bicameral.config import ModelRef, Settings\n": [2],
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bicameral.config import Settings\n": [3],
        "from ..config import Settings\n": [1],
        "from . import config\nconfig.Settings()\n": [],  # bicameral.gate.config, not ours
        "import bicameral.config\nx: bicameral.config.Settings\n": [2],
        "from bicameral import config\n\ndef f() -> None:\n    config.Settings()\n": [4],
        "from bicameral.config import child_process_env\n": [],
    }
    for source, lines in cases.items():
        assert settings_imports(source, "bicameral.gate") == lines, source
