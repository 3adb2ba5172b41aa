"""The AST policy an owner-made command (and its tests) must pass before anything runs: allowed imports, no escapes."""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from types import ModuleType

# Pure standard-library modules: none reaches the file system, the network, processes or the interpreter's insides.
ALLOWED_MODULES = frozenset({
    "re", "json", "math", "cmath", "datetime", "random", "statistics", "textwrap", "string", "itertools",
    "functools", "collections", "dataclasses", "typing", "decimal", "fractions", "zoneinfo", "calendar",
    "unicodedata", "enum", "bisect", "heapq", "difflib", "__future__", "bicameral.commands",
})
# What a test file may import besides: pytest, asyncio to run a handler (tests only ever run in the sandbox).
TEST_MODULES = frozenset({"pytest", "asyncio"})
# Built-ins that open files, run code from text, or reach attributes (dunders among them) by a string.
FORBIDDEN_CALLS = frozenset({
    "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr", "vars", "globals", "locals",
    "breakpoint", "input", "memoryview", "help", "exit", "quit",
})
# Attributes that reach a value's insides without a dunder: str.format's fields (`"{0.__class__}"`), frames,
# code objects, generators and tracebacks (`gen.gi_frame.f_globals` is a module's globals).
_FORBIDDEN_ATTRIBUTES = frozenset({"format", "format_map", "vformat", "Formatter", "get_type_hints", "ForwardRef"})
_FORBIDDEN_PREFIXES = ("f_", "gi_", "cr_", "ag_", "tb_", "co_")
# Statements that run code at import time: refused at module level (an endless loop there would hang the loader).
_TOP_LEVEL = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
              ast.AnnAssign, ast.Expr)


@dataclass(frozen=True)
class Refusal:
    """Which rule a line broke."""

    line: int
    rule: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}"


def check_command(source: str, filename: str = "<command>") -> list[Refusal]:
    """Every rule the command's source breaks; empty: it may be tested and loaded."""
    return _check(source, filename, ALLOWED_MODULES, test_of=None)


def check_tests(source: str, command: str, filename: str = "<tests>") -> list[Refusal]:
    """Every rule the test file breaks: the same rules, plus pytest and the command module; it must import that."""
    return _check(source, filename, ALLOWED_MODULES | TEST_MODULES | {command}, test_of=command)


def _check(source: str, filename: str, allowed: frozenset[str], *, test_of: str | None) -> list[Refusal]:
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [Refusal(exc.lineno or 0, f"not valid Python: {exc.msg}")]
    found: list[Refusal] = []
    for statement in tree.body:
        if not isinstance(statement, _TOP_LEVEL) or (
            isinstance(statement, ast.Expr) and not isinstance(statement.value, ast.Constant)
        ):
            what = type(statement).__name__.lower()
            found.append(Refusal(statement.lineno, f"module level runs code at import ({what}); put it in a function"))
    imports_command = False
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _module(alias.name, allowed, line)
                imports_command |= alias.name == test_of
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(Refusal(line, "relative imports are not allowed; import modules by name"))
            else:
                found += _module(node.module or "", allowed, line)
                imports_command |= node.module == test_of
        elif isinstance(node, ast.Name) and node.id.startswith("__"):
            found.append(Refusal(line, f"the name {node.id} reaches the interpreter's insides"))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_CALLS:
            found.append(Refusal(line, f"using {node.id}() is not allowed"))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            found.append(Refusal(line, f"the attribute .{node.attr} reaches the interpreter's insides"))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            found.append(Refusal(line, f"the attribute .{node.attr} is private (`random._os` is the os module)"))
        elif isinstance(node, ast.Attribute) and (
            node.attr in _FORBIDDEN_ATTRIBUTES or node.attr.startswith(_FORBIDDEN_PREFIXES)
        ):
            found.append(Refusal(line, f"the attribute .{node.attr} is not allowed (use f-strings; no frames or code objects)"))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.append(Refusal(line, "global and nonlocal are not allowed"))
        elif isinstance(node, ast.Delete) and test_of is not None:
            found.append(Refusal(line, "tests may not delete anything"))
    found += _modules_reached(tree)
    if test_of is not None and not imports_command:
        found.append(Refusal(1, f"the tests must import the command module: `from {test_of} import ...`"))
    return sorted(set(found), key=lambda r: (r.line, r.rule))


def _module(name: str, allowed: frozenset[str], line: int) -> list[Refusal]:
    """A module outside the allowlist, however it is named (an alias changes nothing: the import is checked)."""
    if name in allowed or name.split(".")[0] in allowed - {"bicameral"}:
        return []
    return [Refusal(line, f"importing {name} is not allowed (allowed: the pure standard library modules and bicameral.commands)")]


def _allowed_name(module: str) -> bool:
    return module in ALLOWED_MODULES or module.split(".")[0] in ALLOWED_MODULES - {"bicameral.commands"}


def _modules_reached(tree: ast.Module) -> list[Refusal]:
    """An allowed module holds others (`typing.sys`, `dataclasses.inspect`): each name or attribute that is a module
    must be an allowed one, and a module is only ever used as `module.name` (never handed on, where `m.sys` would
    go unseen). The allowed modules are imported here to look: they are pure standard library."""
    bound: dict[str, ModuleType] = {}
    found: list[Refusal] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (module := _allowed_module(alias.name)) is not None:
                    root = alias.name if alias.asname else alias.name.split(".")[0]
                    bound[alias.asname or root] = importlib.import_module(root)
        elif isinstance(node, ast.ImportFrom) and not node.level and (module := _allowed_module(node.module or "")):
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if alias.name == "*":
                    found.append(Refusal(node.lineno, "`import *` is not allowed; name what you import"))
                elif alias.name in _FORBIDDEN_ATTRIBUTES or alias.name.startswith("_"):
                    found.append(Refusal(node.lineno, f"importing {alias.name} from {node.module} is not allowed"))
                elif isinstance(value, ModuleType) and not _allowed_name(value.__name__):
                    found.append(Refusal(node.lineno, f"{alias.name} from {node.module} is the module {value.__name__}"))
                elif isinstance(value, ModuleType):
                    bound[alias.asname or alias.name] = value
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name | ast.Attribute):
            continue
        if isinstance(node, ast.Attribute) and isinstance(base := _resolve(node.value, bound), ModuleType):
            value = getattr(base, node.attr, None)
            if isinstance(value, ModuleType) and not _allowed_name(value.__name__):
                found.append(Refusal(node.lineno, f".{node.attr} of {base.__name__} is the module {value.__name__}"))
                continue
        if isinstance(module := _resolve(node, bound), ModuleType):
            parent = parents.get(node)
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                found.append(Refusal(node.lineno, f"the module {module.__name__} may only be used as {module.__name__}.name"))
    return found


def _allowed_module(name: str) -> ModuleType | None:
    """The allowlisted module of that name, imported; None for any other (refused elsewhere, never imported)."""
    return importlib.import_module(name) if _allowed_name(name) and name != "__future__" else None


def _resolve(node: ast.expr, bound: dict[str, ModuleType]) -> ModuleType | None:
    """The module an expression names (`typing`, `collections.abc`), or None."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(base := _resolve(node.value, bound), ModuleType):
        value = getattr(base, node.attr, None)
        return value if isinstance(value, ModuleType) and _allowed_name(value.__name__) else None
    return None
