"""The container files: a multi-stage Dockerfile (non-root, the data a volume, a health check on the running
instance) and compose.yaml; no container engine runs on the test machine, so the builder stage's install steps are
run in a fresh directory instead, and the venv they make is tried."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from bicameral.backup import RunningLock, beat

ROOT = Path(__file__).parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def instructions(text: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip()) for line in joined.splitlines() if line.strip()]


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for key, value in instructions(DOCKERFILE):
        if key == "FROM":
            found.append([])
        if found:
            found[-1].append((key, value))
    return found


def test_two_stages_on_python_slim_and_the_runtime_stage_takes_only_the_venv():
    builder, runtime = stages()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE.splitlines()
    assert builder[0] == ("FROM", "${PYTHON_IMAGE} AS builder") and runtime[0] == ("FROM", "${PYTHON_IMAGE}")
    assert any(k == "RUN" and "deploy/build-venv /opt/bicameral" in v for k, v in builder)
    assert [v for k, v in runtime if k == "COPY"] == ["--from=builder /opt/bicameral /opt/bicameral"]
    assert not any("build-essential" in v or "cmake" in v for _, v in runtime)  # no compilers at run time


def test_the_runtime_runs_as_a_user_with_bubblewrap_the_data_a_volume_and_a_live_health_check():
    _, runtime = stages()
    values = dict(runtime)
    assert values["USER"] not in ("root", "0")
    installed = " ".join(v for k, v in runtime if k == "RUN")
    assert "bubblewrap" in installed and " git" in installed  # the sandbox; the owner's commands' history
    assert '"/data"' in values["VOLUME"] and "BICAMERAL_DATA_DIR=/data" in values["ENV"]
    assert values["HEALTHCHECK"].endswith('CMD ["bicameral", "doctor", "--live"]')
    assert values["ENTRYPOINT"] == '["bicameral"]' and values["CMD"] == '["run"]'


def test_compose_uses_the_same_health_check_volumes_and_the_sandbox_options():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    service = compose["services"]["bicameral"]
    assert service["healthcheck"]["test"] == ["CMD", "bicameral", "doctor", "--live"]
    assert sorted(service["volumes"]) == ["backups:/backups", "data:/data"]
    assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= set(service["security_opt"])


def test_the_build_context_holds_what_the_builder_copies():
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    builder, _ = stages()
    copied = [v.split()[:-1] for k, v in builder if k == "COPY"]
    for sources in copied:
        for source in sources:
            assert f"!{source.rstrip('/')}" in ignore or f"!{source.rstrip('/')}/" in ignore, source


def test_the_llama_build_matches_scripts_setup():
    def llama(text: str) -> tuple[str, str]:
        version = re.search(r'llama_version="([^"]+)"', text)
        flags = re.search(r'llama_flags="([^"]+)"', text, flags=re.S)
        assert version and flags
        return version.group(1), " ".join(flags.group(1).replace("\\\n", " ").split())

    assert llama((ROOT / "deploy" / "build-venv").read_text()) == llama((ROOT / "scripts" / "setup").read_text())


@pytest.mark.slow
@pytest.mark.timeout(900)  # a pip install of the whole project: minutes on a loaded machine
def test_the_builder_steps_make_a_working_venv_in_a_fresh_directory(tmp_path):
    """What `docker build` would run, run here: the builder's files copied to a fresh directory, its install script."""
    context = tmp_path / "src"
    builder, _ = stages()
    for key, value in builder:
        if key == "COPY":
            *sources, dest = value.split()
            for source in sources:
                target = context / dest / (Path(source).name if dest.endswith("/") else "")
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / source, target)
    # The portable llama.cpp wheel scripts/setup built (5 minutes), when there is one; else no local model.
    built = sorted(Path.home().glob(".cache/bicameral/wheels/*/llama_cpp_python-0.3.36-*.whl"))
    env = {**os.environ, "BICAMERAL_EXTRAS": "local,matrix" if built else "matrix"}
    if built:
        env["BICAMERAL_WHEELS"] = str(built[0].parent)
    venv = tmp_path / "venv"
    done = subprocess.run([str(context / "deploy" / "build-venv"), str(venv)], cwd=context, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    python = venv / "bin" / "python"
    # Installed, not editable: the package data (migrations, prompts) came along.
    check = "from bicameral.store.db import Database; import sys; print(Database(sys.argv[1]).migrate())"
    version = subprocess.run([str(python), "-c", check, str(tmp_path / "x.db")], capture_output=True, text=True,
                             cwd=tmp_path, timeout=60)
    assert version.returncode == 0 and int(version.stdout) > 0, version.stderr
    # The image's health check: unhealthy until an assistant holds the data dir, healthy while one does.
    data = tmp_path / "data"
    data.mkdir()
    health_env = {k: v for k, v in os.environ.items() if not k.startswith("BICAMERAL_")} | {"BICAMERAL_DATA_DIR": str(data)}
    health = [str(venv / "bin" / "bicameral"), "doctor", "--live"]
    idle = subprocess.run(health, capture_output=True, text=True, cwd=tmp_path, env=health_env, timeout=60)
    assert idle.returncode == 1 and "no assistant is running" in idle.stdout
    running = RunningLock(data)
    running.hold()
    try:
        stuck = subprocess.run(health, capture_output=True, text=True, cwd=tmp_path, env=health_env, timeout=60)
        beat(data, time.time())  # what a running app's event loop does on a timer
        live = subprocess.run(health, capture_output=True, text=True, cwd=tmp_path, env=health_env, timeout=60)
    finally:
        running.release()
    assert stuck.returncode == 1 and "has not turned" in stuck.stdout
    assert live.returncode == 0 and "an assistant is running" in live.stdout
