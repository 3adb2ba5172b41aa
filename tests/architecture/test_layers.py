"""Imports only go down the layers of docs/architecture.md, and no modules import each other; this reads the code.

Every import counts, at any depth. One deferred into a function still makes the two modules depend on each other:
it only changes when the cycle bites (the first call instead of the first import), and it hides the cycle from a
reader. One under `if TYPE_CHECKING:` counts too: a type that both modules need is a piece of design both lean on,
and belongs below them both (the shapes in `types.py`, a protocol beside what implements it), not on either side.
"""

from __future__ import annotations

import ast
from collections import deque
from itertools import pairwise
from pathlib import Path

import bicameral
from tests.architecture.source import imported_module

SRC = Path(bicameral.__file__).parent

# Bottom to top. A module may import its own package or any package of a lower layer, never one
# of its own layer or above. Top-level modules count as packages of their own.
LAYERS: list[set[str]] = [
    {"events", "errors", "config", "child_env", "redaction", "imports"},  # vocabulary, and what never loads
    # shared shapes, retry schedule, logging, prompts, failure sentences, prompt escaping, the fixed services'
    # HTTP set-up, the one text normaliser, file names and folders
    {"types", "backoff", "observe", "prompts", "failures", "folders", "markup", "net", "text", "threads"},
    # the parts: completion APIs, SQLite, platforms, sandbox, web, headless Chromium
    {"models", "store", "channels", "sandbox", "web", "browser", "backup"},  # backup: copies of the data dir
    {"commands"},  # the owner's own commands: the @command decorator, the AST policy, loading, sandboxed tests, git
    {"tools", "media"},  # the registry and the tools; reading what people send (documents, voice)
    {"context", "delivery"},  # what a model call is shown; how answers leave (router, outbox, progress note)
    {"mcp", "agent", "tasks", "turns", "scheduler"},  # the machinery every mode shares
    {"gate", "front", "back", "single", "offline", "claude_code"},  # the intake and the chambers
    {"console"},  # the owner's desk: commands that read and change everything below
    {"dashboard"},  # the web dashboard: logins, the live page (loaded only when enabled)
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


def _module_of(path: Path, root: Path) -> str:
    """`bicameral.store.query` for store/query.py, `bicameral.store` for store/__init__.py."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path) -> dict[str, dict[str, int]]:
    """Each module of the package at `root` → the modules of that package it imports (any depth), each with a line."""
    paths = {_module_of(path, root): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        imports: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = imported_module(node, package)
                # `from bicameral.store import query` imports the module; `from bicameral.store import Stores`, the package.
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names]
            else:
                continue
            for name in names:
                while name and name not in paths:  # a name inside a module, or another package altogether
                    name = name.rpartition(".")[0]
                if name and name != module:
                    imports[name] = min(node.lineno, imports.get(name, node.lineno))
        graph[module] = imports
    return graph


def _reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _shortest_loop(graph: dict[str, dict[str, int]], start: str) -> list[str]:
    """start → … → start through the fewest imports."""
    queue, seen = deque([[start]]), {start}
    while queue:
        path = queue.popleft()
        for target in sorted(graph[path[-1]]):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                queue.append([*path, target])
    raise AssertionError(f"{start} is in no cycle")


def _cycles(graph: dict[str, dict[str, int]]) -> list[str]:
    """One loop for each group of modules that import each other, with the line of each import in it."""
    reach = {module: _reachable(graph, module) for module in graph}
    found, covered = [], set()
    for module in sorted(graph):
        if module in covered or module not in reach[module]:
            continue
        covered |= {other for other in reach[module] if module in reach[other]}
        loop = _shortest_loop(graph, module)
        found.append(" → ".join(f"{a}:{graph[a][b]}" for a, b in pairwise(loop)) + f" → {module}")
    return found


def test_every_import_goes_down_a_layer() -> None:
    assert _violations() == []


def test_every_package_has_a_layer() -> None:
    packages = {_package_of(p) for p in SRC.rglob("*.py")}
    packages |= {p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"}
    for package in packages:
        _rank(package)


def test_no_modules_import_each_other() -> None:
    cycles = _cycles(_import_graph(SRC))
    assert cycles == [], "move what both need below them both, or let one side hand it over: " + "; ".join(cycles)


def test_the_check_catches_a_cycle_however_it_is_imported(tmp_path: Path) -> None:
    """The checker itself: a deferred import and a TYPE_CHECKING one close a cycle; a one-way import does not."""
    package = tmp_path / "pkg"
    package.mkdir()
    modules = {
        "__init__.py": "",
        "a.py": "def f():\n    from pkg.b import g\n",  # deferred
        "b.py": "from pkg import a\n",  # a module named through its package
        "c.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .d import D\n",  # type-only, relative
        "d.py": "import pkg.c\n",
        "e.py": "from pkg.a import f\n",  # one way
    }
    for name, source in modules.items():
        (package / name).write_text(source)
    assert _cycles(_import_graph(package)) == ["pkg.a:2 → pkg.b:1 → pkg.a", "pkg.c:4 → pkg.d:1 → pkg.c"]


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a store module importing the app would be reported."""
    module = tmp_path / "bad.py"
    module.write_text("from bicameral.app import App\n")
    assert ("app", 1) in _imported_packages(module)
    assert _rank("app") > _rank("store")
