"""The access policy from access.json: who may talk to the assistant; hot-reloaded on change, changed atomically."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bicameral.events import TRUSTED_CHANNELS, Inbound, OwnerId, is_owner

log = logging.getLogger(__name__)
Policy = Literal["owner_only", "allowlist", "open"]
POLICIES: tuple[Policy, ...] = ("owner_only", "allowlist", "open")


class AccessConfig(BaseModel):
    # Keys we do not know (a note the owner wrote in the file) are kept: a change never drops them.
    model_config = ConfigDict(extra="allow")

    policy: Policy = "owner_only"
    allowed_users: list[int | str] = []
    allowed_chats: list[int | str] = []


class AccessFileError(Exception):
    """access.json cannot be read as a policy, so it is not changed: someone may be editing it by hand."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass
class AccessPolicy:
    """Reads access.json (creating the default on first run) and re-reads it whenever it changes."""

    path: Path
    owner_id: OwnerId
    _config: AccessConfig = field(default_factory=AccessConfig)
    _stamp: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.save(AccessConfig())
        self._reload()

    @property
    def config(self) -> AccessConfig:
        self._reload()
        return self._config

    @property
    def backup_path(self) -> Path:
        """The version before the last change made through `update`."""
        return self.path.with_name(self.path.name + ".bak")

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
        _write_atomic(self.path, _dumped(config))

    def update(self, change: Callable[[AccessConfig], AccessConfig]) -> AccessConfig:
        """Change the policy: the file is read afresh, `change` applied to it, and the result written atomically,
        the previous version kept as access.json.bak. Returns the policy now in force.

        A file that cannot be read as a policy raises `AccessFileError` and is left as it is: the last good policy
        this process keeps must not overwrite what someone is writing by hand. A missing file is changed from the
        policy in force. When `change` changes nothing, nothing is written.
        """
        raw = self._read_raw()
        current = self._config if raw is None else _parsed(self.path, raw)
        changed = change(current.model_copy(deep=True))
        if changed == current:
            return current
        if raw is not None:
            _write_atomic(self.backup_path, raw)
        _write_atomic(self.path, _dumped(changed))
        self._config, self._stamp = changed, _stamp_of(self.path)
        log.info("access policy changed: %s, %d users, %d chats", changed.policy,
                 len(changed.allowed_users), len(changed.allowed_chats))
        return changed

    def read(self) -> AccessConfig:
        """The policy the file holds now (the one in force if it is missing), or `AccessFileError`."""
        raw = self._read_raw()
        return self._config if raw is None else _parsed(self.path, raw)

    def _read_raw(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise AccessFileError(self.path, exc.strerror or type(exc).__name__) from None

    def _reload(self) -> None:
        stamp = _stamp_of(self.path)
        if stamp is None or stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._config = _parsed(self.path, self.path.read_bytes())
            log.info("access policy loaded: %s", self._config.policy)
        except (OSError, AccessFileError) as exc:
            # Keep the last good policy: a typo must not open the bot up or lock the owner out.
            log.error("ignoring broken %s (keeping policy %s): %s", self.path, self._config.policy, str(exc)[:300])


def _parsed(path: Path, raw: bytes) -> AccessConfig:
    """The policy a file holds, or `AccessFileError` saying in one line what is wrong with it."""
    try:
        return AccessConfig.model_validate(json.loads(raw.decode("utf-8")))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise AccessFileError(path, f"{where}: {first['msg']}") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise AccessFileError(path, f"not valid JSON ({str(exc)[:200]})") from None


def _dumped(config: AccessConfig) -> bytes:
    return (json.dumps(config.model_dump(), indent=2) + "\n").encode("utf-8")


def _stamp_of(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file: a rename gives a new inode even within the same mtime tick."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _write_atomic(path: Path, data: bytes) -> None:
    """Write a temporary file in the same folder, sync it, rename it over `path`, sync the folder: a crash leaves
    the old file or the new one, never half of either. The old file's permissions are kept."""
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every file system lets a folder be synced
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def _contains(values: list[int | str], wanted: str) -> bool:
    return any(str(v) == wanted for v in values)
