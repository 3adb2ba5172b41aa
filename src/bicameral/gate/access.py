"""The access policy from access.json: who may talk to the assistant; hot-reloaded on change."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from bicameral.events import TRUSTED_CHANNELS, Inbound, is_owner

log = logging.getLogger(__name__)
Policy = Literal["owner_only", "allowlist", "open"]


class AccessConfig(BaseModel):
    policy: Policy = "owner_only"
    allowed_users: list[int | str] = []
    allowed_chats: list[int | str] = []


@dataclass
class AccessPolicy:
    """Reads access.json (creating the default on first run) and re-reads it whenever it changes."""

    path: Path
    owner_id: int | None
    _config: AccessConfig = field(default_factory=AccessConfig)
    _stamp: tuple[float, int] | None = None

    def __post_init__(self) -> None:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.save(AccessConfig())
        self._reload()

    @property
    def config(self) -> AccessConfig:
        self._reload()
        return self._config

    def allows(self, inbound: Inbound) -> bool:
        if inbound.channel in TRUSTED_CHANNELS:
            return True
        config = self.config
        if inbound.is_private:
            if is_owner(inbound, self.owner_id) or config.policy == "open":
                return True
            return config.policy == "allowlist" and _contains(config.allowed_users, inbound.sender.id)
        if config.policy == "open":
            return True
        return config.policy == "allowlist" and _contains(config.allowed_chats, inbound.chat.split(":", 1)[-1])

    def save(self, config: AccessConfig) -> None:
        """Write atomically, so a reader never sees half a file."""
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(config.model_dump(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def _reload(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return
        stamp = (stat.st_mtime, stat.st_size)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._config = AccessConfig.model_validate(json.loads(self.path.read_text(encoding="utf-8")))
            log.info("access policy loaded: %s", self._config.policy)
        except (OSError, ValueError, ValidationError) as exc:
            # Keep the last good policy: a typo must not open the bot up or lock the owner out.
            log.error("ignoring broken %s (keeping policy %s): %s", self.path, self._config.policy, str(exc)[:300])


def _contains(values: list[int | str], wanted: str) -> bool:
    return any(str(v) == wanted for v in values)
