"""Figures and how they are printed."""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass

import psutil
from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class Figure:
    """One measured number, ready to print."""

    scenario: str
    name: str
    value: float
    unit: str
    note: str = ""

    def shown(self) -> str:
        """The value with its unit, at a precision that suits it."""
        if self.unit == "ms":
            return f"{self.value:,.2f} ms"
        if self.unit == "µs":
            return f"{self.value:,.2f} µs"
        if self.unit == "s":
            return f"{self.value:,.3f} s"
        if self.unit == "MiB":
            return f"{self.value:,.1f} MiB"
        if self.unit == "x":
            return f"{self.value:,.2f}x"
        return f"{self.value:,.0f} {self.unit}".rstrip()


def machine() -> str:
    """Cores, memory, Python and OS in one line."""
    logical = os.cpu_count() or 0
    physical = psutil.cpu_count(logical=False) or logical
    memory = psutil.virtual_memory().total / 1024**3
    return (
        f"{logical} logical / {physical} physical cores, {memory:.1f} GiB RAM, "
        f"Python {platform.python_version()} ({sys.implementation.name}), {platform.system()} {platform.release()}"
    )


def print_report(console: Console, figures: list[Figure]) -> None:
    """One table, a scenario's rows together."""
    table = Table(title="bicameral benchmark", title_justify="left")
    table.add_column("scenario")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("note", overflow="fold")
    previous = ""
    for figure in figures:
        scenario = figure.scenario if figure.scenario != previous else ""
        previous = figure.scenario
        table.add_row(scenario, figure.name, figure.shown(), figure.note)
    console.print(table)
