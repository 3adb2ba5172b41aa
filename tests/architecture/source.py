"""Reading our own source for the architecture tests: the module a `from … import` names."""

from __future__ import annotations

import ast


def imported_module(node: ast.ImportFrom, package: str) -> str:
    """The module a `from … import` names, relative ones resolved against the importing module's package."""
    if node.level == 0:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)
