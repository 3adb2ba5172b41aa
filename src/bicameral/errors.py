"""The one exception tree: every error bicameral raises on purpose derives from `BicameralError`.

`cli.py` catches the base once and exits 2 with the message, which always says what to fix.

    BicameralError
    ├── ConfigError          the configuration cannot work (settings, data dir, models)
    │   └── PluginsError     plugins.json is unreadable or names what does not exist
    ├── ForbiddenFlagError   a Claude Code argv or environment would bypass permission checks
    └── ChannelStartError    a channel cannot start (bad credentials, unreachable server)
"""

from __future__ import annotations


class BicameralError(Exception):
    """Base of every error bicameral raises on purpose; its message is meant for a person."""


class ConfigError(BicameralError):
    """The configuration cannot work; the message says what to fix."""


class PluginsError(ConfigError):
    """plugins.json is malformed or names a tool or group that does not exist."""


class ForbiddenFlagError(BicameralError):
    """A Claude Code argv or environment would bypass permission checks: refused, never run."""


class ChannelStartError(BicameralError):
    """A channel cannot start (bad credentials, unreachable server); the message says what to fix."""
