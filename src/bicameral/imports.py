"""Optional parts of third-party packages that the assistant never uses, kept from loading at all."""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

# Each is tried at import time by a package we use, which falls back cleanly when it is missing:
# httpx's command line pulls in click, rich and pygments (~5 MB).
NEVER_USED = ("httpx._main",)


def skip_never_used() -> None:
    """Make importing the NEVER_USED modules fail, so the packages that try them take their fallbacks."""
    for name in NEVER_USED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None is how the import system spells "absent"


def import_without(module: str, absent: tuple[str, ...]) -> ModuleType:
    """Import `module` as if the packages in `absent` were not installed (unless already loaded elsewhere).

    For try-imports of features we never use; the packages stay importable for everyone after.
    """
    hidden = [name for name in absent if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        return importlib.import_module(module)
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


def warm_in_background(*modules: str) -> None:
    """Import `modules` in a worker thread now, so the first use finds them loaded instead of waiting."""

    def load() -> None:
        for name in modules:
            importlib.import_module(name)

    threading.Thread(target=load, name="warm-imports", daemon=True).start()
