"""`bicameral doctor`: check the configuration and each dependency, and say what to fix."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.console import Console

from bicameral.config import Settings
from bicameral.errors import ConfigError


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True


async def run_checks(settings: Settings, console: Console | None = None) -> bool:
    """Print one line per check; True when every required check passed."""
    console = console or Console(highlight=False)
    checks: list[Callable[[Settings], Awaitable[Check]]] = [
        _data_dir,
        _database,
        _access_file,
        _telegram,
        _matrix,
        _back_model,
        _claude_cli,
        _sandbox,
        _chromium,
        _documents,
        _voice,
        _plugins,
    ]
    all_ok = True
    for check in checks:
        try:
            result = await check(settings)
        except Exception as exc:  # a check that crashes is itself a finding
            result = Check(check.__name__.strip("_"), False, f"{type(exc).__name__}: {exc}")
        mark = "[green]✓[/green]" if result.ok else ("[red]✗[/red]" if result.required else "[yellow]–[/yellow]")
        console.print(f"{mark} {result.name}: {result.detail}")
        all_ok &= result.ok or not result.required
    console.print("[green]all required checks passed[/green]" if all_ok else "[red]fix the items marked ✗[/red]")
    return all_ok


def live_check(settings: Settings, now: float | None = None) -> Check:
    """`bicameral doctor --live` (a container's health check): does an assistant run on this data dir, and turn?

    A running assistant holds a lock on the data dir for as long as its process lives, and its event loop touches
    the heartbeat file on a timer: a process alive but stuck stops touching it. /health's traffic figures follow.
    """
    from bicameral.app.backups import HEARTBEAT_SECONDS
    from bicameral.backup import is_running, last_beat

    now = time.time() if now is None else now
    where = settings.data_dir.resolve()
    if not is_running(settings.data_dir):
        return Check("live", False, f"no assistant is running on {where}")
    # Workers on several hosts share the data dir with PostgreSQL: this host's health is its own workers' beat.
    host = socket.gethostname() if settings.database_url is not None else None
    who = "an assistant" if host is None else f"a worker on this host ({host})"
    beat = last_beat(settings.data_dir, host=host)
    if beat is None or now - beat > 3 * HEARTBEAT_SECONDS:
        since = "never" if beat is None else f"{now - beat:.0f} s ago"
        return Check("live", False, f"{who} holds {where} but its event loop has not turned ({since}): restart it")
    return Check("live", True, "\n".join([f"{who} is running on {where}", *_traffic(settings, now)]))


def _traffic(settings: Settings, now: float) -> list[str]:
    """/health's queue lines, read from the database beside the running app (its figures are not the verdict)."""
    from bicameral.console.health import queue_lines
    from bicameral.store import open_database
    from bicameral.store.messages import MessageStore
    from bicameral.store.outbox import OutboxStore

    try:
        db = open_database(settings.database_location)
    except Exception as exc:
        return [f"the database could not be read: {type(exc).__name__}"]
    try:
        return queue_lines(MessageStore(db), OutboxStore(db), now)
    finally:
        db.close()


async def _data_dir(settings: Settings) -> Check:
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=settings.data_dir):
            pass
    except OSError as exc:
        return Check("data dir", False, f"{settings.data_dir} is not writable ({exc}); set BICAMERAL_DATA_DIR")
    return Check("data dir", True, f"{settings.data_dir.resolve()} is writable")


async def _database(settings: Settings) -> Check:
    from bicameral.store.db import Database

    if settings.database_url is not None:
        return _shared_database(settings.database_url.get_secret_value())
    try:
        db = Database(settings.db_path)
        version = db.migrate()
        db.close()
    except Exception as exc:
        return Check("database", False, f"{settings.db_path} cannot be opened: {exc}")
    return Check("database", True, f"{settings.db_path} at schema version {version}")


def _shared_database(url: str) -> Check:
    """PostgreSQL, read only (workers may be running on it): reached, logged in, its schema against this code's."""
    from bicameral.redaction import without_password
    from bicameral.store.db import known_version
    from bicameral.store.postgres import schema_version

    where, known = without_password(url), known_version()
    try:
        version = schema_version(url)
    except Exception as exc:  # DatabaseUnreachable says why in one line, the password never shown
        return Check("database", False, str(exc) if isinstance(exc, ConfigError) else f"{where}: {type(exc).__name__}")
    if version > known:
        return Check("database", False, f"{where} is at schema version {version}, newer than this bicameral knows "
                                        f"({known}): another worker was upgraded; upgrade this one too")
    later = "" if version == known else f"; the next start migrates it to {known}"
    return Check("database", True, f"{where} (PostgreSQL) at schema version {version}{later}")


async def _access_file(settings: Settings) -> Check:
    from bicameral.gate.access import AccessConfig

    path = settings.resolved_access_path
    if not path.exists():
        return Check("access", True, f"{path} will be created with policy owner_only")
    try:
        config = AccessConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except Exception as exc:
        return Check("access", False, f"{path} is broken ({str(exc)[:200]}); fix or delete it")
    owner = settings.owner_id is not None or settings.matrix_owner_id is not None
    note = "" if owner else " (BICAMERAL_OWNER_ID is not set: nobody is the owner)"
    return Check("access", owner or config.policy != "owner_only", f"policy {config.policy}{note}")


async def _matrix(settings: Settings) -> Check:
    """The homeserver answers (its versions endpoint) and the account logs in (whoami; a password login is undone)."""
    if settings.matrix_homeserver is None:
        return Check("matrix", True, "not configured (set BICAMERAL_MATRIX_HOMESERVER to serve Matrix)", required=False)
    from bicameral.channels.matrix.session import check_account
    from bicameral.errors import ChannelStartError
    from bicameral.redaction import Redactor

    token = settings.matrix_access_token.get_secret_value() if settings.matrix_access_token else None
    password = settings.matrix_password.get_secret_value() if settings.matrix_password else None
    try:
        user = await asyncio.wait_for(check_account(settings.matrix_homeserver, settings.matrix_user_id or "",
                                                    token=token, password=password), timeout=30)
    except (ChannelStartError, TimeoutError) as exc:
        detail = str(exc) or f"{settings.matrix_homeserver} did not answer within 30 s"
        return Check("matrix", False, Redactor([s for s in (token, password) if s])(detail))
    return Check("matrix", True, f"logged in to {settings.matrix_homeserver} as {user}")


async def _telegram(settings: Settings) -> Check:
    if settings.telegram_token is None:
        return Check("telegram", True, "not configured (set BICAMERAL_TELEGRAM_TOKEN to serve Telegram)", required=False)
    from telegram import Bot
    from telegram.error import InvalidToken

    from bicameral.redaction import Redactor

    token = settings.telegram_token.get_secret_value()
    api = settings.telegram_api_url.rstrip("/")
    bot = Bot(token, base_url=f"{api}/bot", base_file_url=f"{api}/file/bot")
    try:
        await asyncio.wait_for(bot.initialize(), timeout=15)  # getMe
        me = bot.bot
    except InvalidToken:
        return Check(
            "telegram", False, f"{settings.telegram_api_url} rejected the token: check BICAMERAL_TELEGRAM_TOKEN (from @BotFather)"
        )
    except Exception as exc:
        # Bot API URLs carry the token, and HTTP errors quote them.
        detail = Redactor([token])(f"{type(exc).__name__}: {exc}")
        return Check("telegram", False, f"{settings.telegram_api_url} refused the token or is unreachable: {detail}")
    finally:
        await bot.shutdown()
    return Check("telegram", True, f"token valid: @{me.username}")


async def _back_model(settings: Settings) -> Check:
    from bicameral.app import model_config
    from bicameral.models import build_model, ping

    ref = settings.back_model
    if ref.startswith("claude-code"):
        found = shutil.which(settings.claude_bin)
        where = f"at {found}" if found else "not found; install @anthropic-ai/claude-code"
        return Check("back model", bool(found), f"{ref}: claude CLI {where}")
    try:
        model = build_model(ref, model_config(settings))
        error = await asyncio.wait_for(ping(model), timeout=60)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    if error:
        return Check("back model", False, f"{ref} is not usable: {error}")
    return Check("back model", True, f"{ref} answered")


async def _claude_cli(settings: Settings) -> Check:
    found = shutil.which(settings.claude_bin)
    detail = f"found at {found}" if found else "not found (needed only for the claude-code executor)"
    return Check("claude", bool(found), detail, required=False)


async def _sandbox(settings: Settings) -> Check:
    from bicameral.app import run_sandbox

    sandbox = run_sandbox(settings)
    why = await sandbox.unavailable()
    if why:
        return Check("sandbox", False, f"the run tool is off: {why}", required=False)
    # Which bounds really hold here: a command's whole tree where cgroups can be written, else each process's.
    return Check("sandbox", True, f"bubblewrap runs; the run tool is on (owner only); {sandbox.bounds()}", required=False)


async def _chromium(settings: Settings) -> Check:
    """Where Chromium is, and whether it starts for render_html and render_latex (or why not)."""
    from bicameral.browser.chromium import Chromium, ChromiumOff

    chromium = Chromium(settings.chromium_path)
    if why := chromium.why_off():
        return Check("chromium", False, f"render_html and render_latex are off: {why}", required=False)
    try:
        context = await chromium.new_context()
        version = context.browser.version if context.browser else "?"
        await context.close()
    except ChromiumOff as exc:
        return Check("chromium", False, f"render_html and render_latex are off: {exc}", required=False)
    finally:
        await chromium.aclose()
    detail = f"{settings.chromium_path} ({version}) starts; render_html and render_latex are on"
    return Check("chromium", True, detail, required=False)


async def _voice(settings: Settings) -> Check:
    """How voice notes are written down: the endpoint (never its key), the offline model, or not at all."""
    from bicameral.app.voice import voice_config
    from bicameral.media.whisper_local import offline_why_off

    voice = voice_config(settings)
    if voice.endpoint is not None:
        endpoint = voice.endpoint
        key = "with a key" if endpoint.api_key else "without a key"
        return Check("voice", True, f"transcribed by {endpoint.url} ({endpoint.model}, {key})", required=False)
    if voice.offline:
        return Check("voice", True, "transcribed on this host by the offline model (Whisper tiny.en, English only)",
                     required=False)
    why = offline_why_off()
    offline = f"the offline model: {why}" if why else "the offline model is installed but BICAMERAL_TRANSCRIPTION_OFFLINE=off"
    return Check("voice", False, "off: set OPENAI_API_KEY or BICAMERAL_TRANSCRIPTION_BASE_URL for an endpoint; "
                 f"{offline}", required=False)


async def _documents(settings: Settings) -> Check:
    """Whether sent documents can be read: the reading libraries are there (looked up, not imported)."""
    from bicameral.media.documents import LIBRARIES, missing_libraries

    missing = missing_libraries()
    if missing:
        return Check("documents", False, f"{', '.join(missing)} missing: those files get only a note (pip install -e .)",
                     required=False)
    return Check("documents", True, f"read in a limited child with {', '.join(LIBRARIES)}; "
                 f"up to {settings.document_max_mb} MB a file", required=False)


async def _plugins(settings: Settings) -> Check:
    """Each external MCP server of plugins.json's `mcps`: its transport, whether it starts, how many tools it offers."""
    from bicameral.mcp.plugins import load_plugins

    try:
        entries = load_plugins(settings.resolved_plugins_path).mcps
    except Exception as exc:
        return Check("plugins", False, str(exc))
    if not entries:
        return Check("plugins", True, "no external MCP servers (plugins.json mcps)", required=False)
    from bicameral.child_env import child_process_env, environment_variable
    from bicameral.mcp.plugin_tools import ExternalTools

    external = ExternalTools(
        entries, lookup=environment_variable, base_env=child_process_env(), start_timeout=settings.plugin_start_timeout_seconds
    )
    tools = await external.load()
    for tool in tools:
        await tool.aclose()
    order = [server.name for server in external.servers]
    started = sorted((s for s in external.statuses if s.started), key=lambda status: order.index(status.name))
    # What did not start, or was left out, is a problem line naming the plugin and why.
    lines = [f"{s.name} ({s.transport}): starts, {s.tools} tool{'s' if s.tools != 1 else ''}" for s in started]
    lines += external.problems
    return Check("plugins", not external.problems, "\n  ".join(lines), required=False)
