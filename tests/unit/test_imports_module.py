"""bicameral.imports: what never loads stays out, and warming loads a module off the caller's thread."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from bicameral.imports import import_without, warm_in_background
from tests.support.chat import eventually_blocking


def test_warming_imports_in_another_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "warm_probe.py").write_text("import threading\nLOADED_ON = threading.current_thread().name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "warm_probe", raising=False)
    warm_in_background("warm_probe")
    eventually_blocking(
        lambda: hasattr(sys.modules.get("warm_probe"), "LOADED_ON"), "the module to be warmed", timeout=30, interval=0.01
    )
    assert sys.modules["warm_probe"].LOADED_ON != threading.current_thread().name


def test_a_module_imported_without_a_package_leaves_the_package_importable(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "optional_dep.py").write_text("")
    (tmp_path / "uses_optional.py").write_text(
        "try:\n    import optional_dep\n    HAS = True\nexcept ImportError:\n    HAS = False\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("optional_dep", "uses_optional"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    module = import_without("uses_optional", absent=("optional_dep",))
    assert module.HAS is False
    import optional_dep  # noqa: F401  # still there for whoever needs it after
