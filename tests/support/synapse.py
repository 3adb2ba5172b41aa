"""A real Synapse homeserver for the Matrix tests: installed once into `<repo>/.cache/synapse`, run on loopback."""

# `python -m tests.support.synapse` installs it: `scripts/test` runs it before pytest, so a fresh CI machine
# has the homeserver before the first Matrix test needs it. Each run gets a generated config: SQLite, one
# loopback listener on a free port, no federation, no TLS, rate limits raised (the defaults 429 a chatty bot),
# and a shared secret for the admin registration API, which is how the tests make their users.

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

PINNED = "1.163.2"
REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".cache" / "synapse"
PYTHON = VENV / "bin" / "python"
SERVER_NAME = "localhost"
READY_SECONDS = 90.0  # a cold start creates the SQLite schema; a warm one answers in about a second


class SynapseUnavailable(RuntimeError):
    """Synapse could not be installed or started; the message says why."""


def _installed() -> str | None:
    if not PYTHON.exists():
        return None
    done = subprocess.run(
        [str(PYTHON), "-c", "from importlib.metadata import version; print(version('matrix-synapse'))"],
        capture_output=True, text=True, timeout=60,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_synapse() -> Path:
    """The Python of Synapse's own venv, with the pinned `matrix-synapse` installed there only when missing."""
    if _installed() == PINNED:
        return PYTHON
    if not PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300)
    command = [str(PYTHON), "-m", "pip", "install", "--quiet", f"matrix-synapse=={PINNED}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or _installed() != PINNED:
        raise SynapseUnavailable(f"`{' '.join(command)}` failed:\n{done.stderr[-2000:]}")
    return PYTHON


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_LIMIT = "{per_second: 1000, burst_count: 1000}"


def config_yaml(folder: Path, port: int, shared_secret: str) -> str:
    """A homeserver for one test session: nothing leaves loopback, nothing is rate limited in practice."""
    return f"""
server_name: "{SERVER_NAME}"
pid_file: "{folder}/homeserver.pid"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{folder}/homeserver.db"
media_store_path: "{folder}/media"
signing_key_path: "{folder}/signing.key"
registration_shared_secret: "{shared_secret}"
macaroon_secret_key: "{secrets.token_hex(16)}"
form_secret: "{secrets.token_hex(16)}"
report_stats: false
enable_registration: false
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
presence:
  enabled: false
url_preview_enabled: false
rc_message: {_LIMIT}
rc_registration: {_LIMIT}
rc_login:
  address: {_LIMIT}
  account: {_LIMIT}
  failed_attempts: {_LIMIT}
rc_joins:
  local: {_LIMIT}
  remote: {_LIMIT}
rc_joins_per_room: {_LIMIT}
rc_invites:
  per_room: {_LIMIT}
  per_user: {_LIMIT}
  per_issuer: {_LIMIT}
rc_admin_redaction: {_LIMIT}
rc_media_create: {_LIMIT}
rc_delayed_event_mgmt: {_LIMIT}
"""


@dataclass(frozen=True)
class MatrixUser:
    user_id: str
    password: str
    access_token: str
    device_id: str


class Synapse:
    """One homeserver process with its own folder; `start` returns once it answers, `stop` ends it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._secret = secrets.token_hex(16)
        self._process: subprocess.Popen[bytes] | None = None
        self.log_path = folder / "synapse.log"

    def start(self) -> Synapse:
        python = ensure_synapse()
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "homeserver.yaml"
        config.write_text(config_yaml(self.folder, self.port, self._secret), encoding="utf-8")
        base = [str(python), "-m", "synapse.app.homeserver", "--config-path", str(config)]
        keys = subprocess.run([*base, "--generate-keys"], capture_output=True, text=True, timeout=120, cwd=self.folder)
        if keys.returncode != 0:
            raise SynapseUnavailable(f"synapse could not make its signing key:\n{keys.stderr[-2000:]}")
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(base, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Poll the versions endpoint until the server answers (the event), or fail with its log."""
        assert self._process is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise SynapseUnavailable(f"synapse exited with {self._process.returncode}:\n{self._log_tail()}")
            try:
                if httpx.get(f"{self.url}/_matrix/client/versions", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise SynapseUnavailable(f"synapse did not answer within {READY_SECONDS:g} s:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def register(self, localpart: str, *, admin: bool = False, displayname: str | None = None) -> MatrixUser:
        """A new user through the shared-secret admin API (`/_synapse/admin/v1/register`, HMAC-SHA1 of the fields)."""
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        nonce = httpx.get(endpoint, timeout=10).json()["nonce"]
        password = secrets.token_urlsafe(12)
        fields = [nonce, localpart, password, "admin" if admin else "notadmin"]
        mac = hmac.new(self._secret.encode(), "\x00".join(fields).encode(), hashlib.sha1).hexdigest()
        body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin, "mac": mac}
        if displayname:
            body["displayname"] = displayname
        answer = httpx.post(endpoint, json=body, timeout=30)
        answer.raise_for_status()
        data = answer.json()
        return MatrixUser(data["user_id"], password, data["access_token"], data["device_id"])

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


if __name__ == "__main__":
    try:
        print(ensure_synapse())
    except SynapseUnavailable as exc:
        print(f"Synapse: {exc}", file=sys.stderr)
        sys.exit(1)
