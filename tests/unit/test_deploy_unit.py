"""deploy/bicameral.service: restarts on failure, checks with `bicameral doctor` first, hardened without breaking the
sandbox (bubblewrap still builds its namespaces under the unit's restrictions, tried for real)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

from bicameral.sandbox.bwrap import bwrap_argv

UNIT = Path(__file__).parents[2] / "deploy" / "bicameral.service"


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """systemd's syntax: sections, `Key=value` lines (a key may repeat), `#` and `;` comments."""
    sections: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        assert sep and current, f"not a unit line: {raw!r}"
        sections[current][key.strip()].append(value.strip())
    return sections


UNIT_KEYS = parse_unit(UNIT.read_text(encoding="utf-8"))
SERVICE = UNIT_KEYS["Service"]


def one(key: str) -> str:
    values = SERVICE[key]
    assert len(values) == 1, f"{key}: {values}"
    return values[0]


def test_it_restarts_on_failure_but_not_on_a_configuration_error():
    assert one("Restart") == "on-failure"
    assert one("RestartPreventExitStatus") == "2"  # cli.py's exit status for what a restart cannot fix
    assert UNIT_KEYS["Unit"]["StartLimitBurst"] and UNIT_KEYS["Unit"]["StartLimitIntervalSec"]
    assert UNIT_KEYS["Install"]["WantedBy"] == ["multi-user.target"]


def test_doctor_checks_before_the_assistant_runs():
    assert one("ExecStartPre").endswith("/bin/bicameral doctor")
    assert one("ExecStart").endswith("/bin/bicameral run")


def test_the_data_and_backups_live_in_state_directories():
    assert one("StateDirectory").split() == ["bicameral", "bicameral-backups"]
    env = dict(value.split("=", 1) for value in SERVICE["Environment"])
    assert env["BICAMERAL_DATA_DIR"] == "/var/lib/bicameral"
    assert env["BICAMERAL_BACKUP_DIR"] == "/var/lib/bicameral-backups"


def test_the_hardening_section_and_what_it_leaves_out_for_bubblewrap():
    for key, value in {
        "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
        "PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes", "Delegate": "yes",
    }.items():
        assert one(key) == value, key
    assert "AF_NETLINK" in one("RestrictAddressFamilies")  # bubblewrap brings up the sandbox's loopback
    for breaks_the_sandbox in ("RestrictNamespaces", "SystemCallFilter", "PrivateUsers", "ProtectControlGroups",
                               "MemoryDenyWriteExecute"):
        assert breaks_the_sandbox not in SERVICE


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_accepts_the_unit(tmp_path):
    # The unit names /opt/bicameral; systemd checks that the commands exist, so point them at this checkout's.
    here = Path(sys.executable).with_name("bicameral")
    unit = tmp_path / "bicameral.service"
    unit.write_text(UNIT.read_text(encoding="utf-8").replace("/opt/bicameral/.venv/bin/bicameral", str(here)))
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("setpriv") is None,
                    reason="needs root (to become another user), bubblewrap and setpriv")
def test_bubblewrap_works_under_the_units_restrictions():
    """As the unit runs it: another user, no new privileges, an empty capability bounding set."""
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        workspace = Path(folder) / "workspace"
        workspace.mkdir()
        os.chmod(folder, 0o755)
        os.chown(workspace, 65534, 65534)
        restricted = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs",
                      "--bounding-set=-all", "--inh-caps=-all"]
        argv = bwrap_argv(shutil.which("bwrap") or "bwrap", workspace, "echo made > out.txt && id -u", as_root=False)
        done = subprocess.run([*restricted, *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "65534"  # the sandbox's own user namespace, mapped as the sandbox maps it
        assert (workspace / "out.txt").read_text() == "made\n"
