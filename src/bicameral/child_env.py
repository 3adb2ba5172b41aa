"""What a child process inherits from ours; beside config.py, the only reader of this process's environment."""

from __future__ import annotations

import os
from collections.abc import Mapping

# What a child process (the `claude` executor) may inherit from ours: an allowlist of paths, locale,
# time zone and certificates. Its home, config dir, credentials and proxy are never inherited: the
# caller sets them from Settings.
_CHILD_ENV_NAMES = frozenset("PATH LANG LANGUAGE TZ TMPDIR SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS".split())
_CHILD_ENV_PREFIXES = ("LC_",)


def child_env_allows(name: str) -> bool:
    """Whether a child process may inherit the variable `name` from its parent."""
    return name in _CHILD_ENV_NAMES or name.startswith(_CHILD_ENV_PREFIXES)


def environment_variable(name: str) -> str | None:
    """A `${VAR}` of plugins.json's `mcps`, read from this process's environment when its server starts; empty is unset."""
    return os.environ.get(name) or None


def child_process_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowed part of `environ` (this process's environment by default), for a child to inherit."""
    source = os.environ if environ is None else environ
    return {key: value for key, value in source.items() if child_env_allows(key)}
