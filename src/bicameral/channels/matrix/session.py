"""Logging the Matrix client in: a given access token, or a password login whose token and device are kept."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

from nio import AsyncClient, AsyncClientConfig, LoginResponse, WhoamiResponse

from bicameral.errors import ChannelStartError

log = logging.getLogger(__name__)

REVOKED = "the Matrix homeserver rejected the access token (M_UNKNOWN_TOKEN): check BICAMERAL_MATRIX_ACCESS_TOKEN"
WRONG_PASSWORD = "the Matrix homeserver refused the login: check BICAMERAL_MATRIX_USER_ID and BICAMERAL_MATRIX_PASSWORD"
DEVICE_NAME = "bicameral"
LOCK_POLL_SECONDS = 0.05  # how often a worker waiting for another's login looks at the lock again


async def log_in(client: AsyncClient, *, token: str | None, password: str | None, session_file: Path) -> None:
    """Leave `client` logged in as its user (checked with whoami), or raise ChannelStartError saying why."""
    if token:
        client.access_token = token
        await _check(client, REVOKED)
        return
    async with _one_at_a_time(session_file):  # workers starting together share one login, not a device each
        await _password_log_in(client, password, session_file)


async def _password_log_in(client: AsyncClient, password: str | None, session_file: Path) -> None:
    stored = _read(session_file, client.homeserver, client.user)
    if stored is not None:
        client.access_token, client.device_id = stored
        try:
            await _check(client, REVOKED)
            return
        except ChannelStartError:
            log.warning("matrix: the stored login was revoked; logging in again with the password")
    answer = await client.login(password or "", device_name=DEVICE_NAME)
    if not isinstance(answer, LoginResponse):
        raise ChannelStartError(f"{WRONG_PASSWORD} ({getattr(answer, 'message', answer)})")
    _write(session_file, client.homeserver, client.user, answer.access_token, answer.device_id)
    log.info("matrix: logged in as %s (device %s)", answer.user_id, answer.device_id)


@contextlib.asynccontextmanager
async def _one_at_a_time(session_file: Path) -> AsyncIterator[None]:
    """Hold a lock beside the kept login while reading or renewing it: the workers sharing the data dir start at
    once, and the second must find the first one's login rather than make a device of its own."""
    session_file.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(session_file.with_name(session_file.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # another worker is logging in: its login is read once it is written
                await asyncio.sleep(LOCK_POLL_SECONDS)
        yield
    finally:
        os.close(descriptor)  # closing lets the lock go


async def _check(client: AsyncClient, revoked: str) -> None:
    try:
        answer = await client.whoami()
    except Exception as exc:
        raise ChannelStartError(f"cannot reach the Matrix homeserver {client.homeserver}: {type(exc).__name__}") from None
    if isinstance(answer, WhoamiResponse):
        client.user_id = answer.user_id
        if answer.device_id:
            client.device_id = answer.device_id
        return
    if getattr(answer, "status_code", None) == "M_UNKNOWN_TOKEN":
        raise ChannelStartError(revoked)
    raise ChannelStartError(f"the Matrix homeserver did not confirm the login: {getattr(answer, 'message', answer)}")


def _read(path: Path, homeserver: str, user: str) -> tuple[str, str] | None:
    """The kept token and device id, if they are for this homeserver and user."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("homeserver") != homeserver or data.get("user_id") != user:
        return None
    token, device = data.get("access_token"), data.get("device_id")
    return (token, device) if isinstance(token, str) and isinstance(device, str) else None


def _write(path: Path, homeserver: str, user: str, token: str, device: str) -> None:
    """Keep the login for the next start, readable by this user only (it is as good as the password)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump({"homeserver": homeserver, "user_id": user, "access_token": token, "device_id": device}, file)
    os.replace(partial, path)


async def check_account(homeserver: str, user_id: str, *, token: str | None, password: str | None) -> str:
    """For `bicameral doctor`: the homeserver answers its versions endpoint and the account logs in (whoami); returns
    the user id, or raises ChannelStartError saying which failed. A password's own login is logged out again."""
    config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, encryption_enabled=False, request_timeout=15)
    client = AsyncClient(homeserver.rstrip("/"), user_id, config=config)
    try:
        try:
            versions = await client.send("GET", "/_matrix/client/versions")
        except Exception as exc:
            raise ChannelStartError(f"cannot reach {client.homeserver}: {type(exc).__name__}") from None
        if versions.status != 200:
            raise ChannelStartError(f"{client.homeserver} answered {versions.status} for its versions: is it a homeserver?")
        if token:
            client.access_token = token
            await _check(client, REVOKED)
            return str(client.user_id)
        login = await client.login(password or "", device_name=f"{DEVICE_NAME} doctor")
        if not isinstance(login, LoginResponse):
            raise ChannelStartError(f"{WRONG_PASSWORD} ({getattr(login, 'message', login)})")
        await _check(client, REVOKED)
        await client.logout()
        return str(client.user_id)
    finally:
        await client.close()
