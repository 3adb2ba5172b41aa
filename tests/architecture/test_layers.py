"""Imports only go down the layers of docs/architecture.md; this reads the code and fails on any that go up."""

from __future__ import annotations

import ast
from pathlib import Path

import bicameral

SRC = Path(bicameral.__file__).parent

# Bottom to top. A module may import its own package or any package of a lower layer, never one
# of its own layer or above. Top-level modules count as packages of their own.
LAYERS: list[set[str]] = [
    {"events", "errors", "config", "redaction", "imports"},  # vocabulary, and what never loads
    # shared shapes, retry schedule, logging, prompts, failure sentences, prompt escaping, the fixed services'
    # HTTP set-up, the one text normaliser, file names and folders
    {"types", "backoff", "observe", "prompts", "failures", "folders", "markup", "net", "text", "threads"},
    {"models", "store", "channels", "sandbox", "web"},  # the parts: completion APIs, SQLite, platforms, sandbox, web
    {"tools"},  # the registry and the tools
    {"context", "delivery"},  # what a model call is shown; how answers leave (router, outbox, progress note)
    {"mcp", "agent", "tasks", "turns", "scheduler"},  # the machinery every mode shares
    {"gate", "front", "back", "single", "offline", "claude_code"},  # the intake and the chambers
    {"app"},  # wiring: reads Settings and builds everything
    {"doctor"},  # `bicameral doctor`: checks what the app would build (the models, the sandbox)
    {"cli"},  # the command line
    {"__main__", "__init__"},  # `python -m bicameral`
]


def _rank(package: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if package in layer:
            return rank
    raise AssertionError(f"bicameral.{package} is in no layer: add it to LAYERS and to docs/architecture.md")


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imported_packages(path: Path) -> set[tuple[str, int]]:
    """Every bicameral package the module imports, at any depth (deferred imports too), with its line."""
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "bicameral" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


def _violations() -> list[str]:
    problems: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        own = _package_of(path)
        for target, line in sorted(_imported_packages(path)):
            if target == own:
                continue
            if _rank(target) >= _rank(own):
                problems.append(
                    f"{path.relative_to(SRC)}:{line} imports bicameral.{target} "
                    f"(layer {_rank(target)}) from layer {_rank(own)}"
                )
    return problems


def test_every_import_goes_down_a_layer() -> None:
    assert _violations() == []


def test_every_package_has_a_layer() -> None:
    packages = {_package_of(p) for p in SRC.rglob("*.py")}
    packages |= {p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"}
    for package in packages:
        _rank(package)


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a store module importing the app would be reported."""
    module = tmp_path / "bad.py"
    module.write_text("from bicameral.app import App\n")
    assert ("app", 1) in _imported_packages(module)
    assert _rank("app") > _rank("store")
