"""Settings turned into what each component takes: the one place, beside `App`, that reads them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bicameral.app.voice import voice_config
from bicameral.back.executor import BackConfig
from bicameral.browser.chromium import Chromium
from bicameral.browser.render import Renderer
from bicameral.browser.session import BrowserLimits
from bicameral.channels.base import Channel
from bicameral.config import Settings
from bicameral.errors import ConfigError
from bicameral.events import AttachmentKind, Inbound, Owners, Sender, chat_key
from bicameral.front.chamber import FrontConfig
from bicameral.gate.gate import GateConfig
from bicameral.media.documents import DocumentLimits, DocumentReader
from bicameral.media.intake import AttachmentReader, MediaIntake
from bicameral.media.voice import VoiceReader
from bicameral.models import ModelConfig
from bicameral.sandbox.artifacts import SendLimits
from bicameral.sandbox.runner import Sandbox
from bicameral.scheduler.retry import FireRetry
from bicameral.single import SingleConfig
from bicameral.store.messages import MessageStore
from bicameral.tools.base import Tool
from bicameral.tools.browser import Browser, browser_tools
from bicameral.tools.registry import discover_tools
from bicameral.tools.render import RenderHtml, RenderLatex
from bicameral.tools.shell import RunCommand
from bicameral.tools.web import WebFetch, WebSearch
from bicameral.turns.lanes import LaneConfig
from bicameral.web.address import allowance_policy
from bicameral.web.fetch import FetchLimits, WebFetcher
from bicameral.web.search import DdgsSearcher

if TYPE_CHECKING:
    from pydantic import SecretStr

    from bicameral.channels.matrix import MatrixConfig
    from bicameral.channels.telegram import TelegramConfig
    from bicameral.claude_code.chamber import ChamberConfig
    from bicameral.claude_code.config import ClaudeCodeConfig
    from bicameral.offline import OfflineConfig


log = logging.getLogger(__name__)


def configured_channels(settings: Settings) -> list[Channel]:
    """The channels `bicameral run` serves, from the settings."""
    channels: list[Channel] = []
    if settings.telegram_token is not None:
        from bicameral.channels.telegram import TelegramChannel

        channels.append(TelegramChannel(telegram_config(settings)))
    if settings.matrix_homeserver is not None:
        from bicameral.channels.matrix import MatrixChannel

        channels.append(MatrixChannel(matrix_config(settings)))
    if not channels:
        raise ConfigError(
            "no channel is configured: set BICAMERAL_TELEGRAM_TOKEN (from @BotFather) to serve Telegram, "
            "BICAMERAL_MATRIX_HOMESERVER (and the account) to serve Matrix, or run `bicameral chat` to talk in this terminal"
        )
    return channels


async def tools_for(settings: Settings, left_out: list[str] | None = None) -> list[Tool[Any]]:
    """Every tool, with `run` on the configured bubblewrap and the render tools on the configured Chromium, each left
    out where it cannot work here (no sandbox, no Chromium).

    Each tool left out is added to `left_out` with why (the owner's /audit shows them).
    """
    run = RunCommand(run_sandbox(settings))
    renderer = Renderer(Chromium(settings.chromium_path))
    rendering: list[Tool[Any]] = [RenderHtml(renderer), RenderLatex(renderer)]
    # The browser tools share the render tools' Chromium (one per process).
    browsing = browser_tools(browser_for(settings, renderer.chromium))
    built = {run.name, *(tool.name for tool in [*rendering, *browsing])}
    tools = [tool for tool in discover_tools() if tool.name not in built]
    tools += await plugin_tools(settings, left_out)
    if why := renderer.chromium.why_off():
        log.warning("render_html, render_latex and the browser tools are off: %s", why)
        if left_out is not None:
            left_out.append(f"render_html and render_latex are off: {why}")
            left_out.append(f"the browser tools are off: {why}")
    else:
        tools += [*rendering, *browsing]
    if why := await run.why_off():
        log.warning("the run tool is off: %s", why)
        if left_out is not None:
            left_out.append(f"the run tool is off: {why}")
        return tools
    return [*tools, run]


async def plugin_tools(settings: Settings, left_out: list[str] | None = None) -> list[Tool[Any]]:
    """The tools of plugins.json's external MCP servers (`mcps`); a server whose list is not kept yet is started to list
    them, the others on first use. No `mcps`: the client library is not even imported."""
    from bicameral.mcp.plugins import load_plugins

    entries = load_plugins(settings.resolved_plugins_path).mcps
    if not entries:
        return []
    from bicameral.child_env import child_process_env, environment_variable
    from bicameral.mcp.plugin_tools import ExternalTools

    external = ExternalTools(
        entries, lookup=environment_variable, base_env=child_process_env(), start_timeout=settings.plugin_start_timeout_seconds,
        cache=settings.data_dir / "plugins_tools.json",  # known lists: those servers start on first use
    )
    tools = await external.load()
    for line in external.problems:
        log.warning("%s", line)
    if left_out is not None:
        left_out.extend(external.problems)
    return tools


# --- Settings, read here once: what each component is given ---


def run_sandbox(settings: Settings) -> Sandbox:
    """The `run` tool's bubblewrap sandbox, with the workspace quota and the free space kept."""
    return Sandbox.configured(
        settings.sandbox_bwrap, quota_mb=settings.workspace_quota_mb, reserve_mb=settings.disk_reserve_mb
    )


def web_fetch_tool(settings: Settings) -> WebFetch:
    limits = FetchLimits(
        max_bytes=settings.web_fetch_max_bytes,
        timeout_seconds=settings.web_fetch_timeout_seconds,
        max_redirects=settings.web_fetch_max_redirects,
    )
    return WebFetch(WebFetcher(limits, policy=allowance_policy(settings.web_allow_hosts or ())))


def browser_for(settings: Settings, chromium: Chromium, limits: BrowserLimits | None = None) -> Browser:
    """The browser tools' pages on the shared Chromium, their requests under web_fetch's rules and allowances."""
    fetch_limits = FetchLimits(timeout_seconds=settings.web_fetch_timeout_seconds)
    fetcher = WebFetcher(fetch_limits, policy=allowance_policy(settings.web_allow_hosts or ()))
    limits = limits or BrowserLimits(
        timeout_seconds=settings.browser_timeout_seconds,
        idle_seconds=settings.browser_idle_seconds,
        download_max_bytes=settings.browser_download_max_bytes,
    )
    return Browser(chromium, fetcher, limits)


def web_search_tool(settings: Settings) -> WebSearch:
    return WebSearch(DdgsSearcher(timeout_seconds=settings.web_search_timeout_seconds))


def media_intake(settings: Settings, messages: MessageStore) -> MediaIntake:
    """How sent files are read before a turn: a reader per kind, each loading its libraries on its first file."""
    readers: dict[AttachmentKind, AttachmentReader] = {"voice": VoiceReader(voice_config(settings))}
    readers["document"] = DocumentReader(DocumentLimits(max_bytes=settings.document_max_mb << 20))
    return MediaIntake(readers, data_dir=settings.data_dir, keep=lambda inbound: messages.rewrite(inbound.row_id, inbound))


def gate_config(settings: Settings) -> GateConfig:
    return GateConfig(
        owner_id=owners(settings),
        data_dir=settings.data_dir,
        max_inbound_chars=settings.max_inbound_chars,
        group_member_rate_limit_per_min=settings.group_member_rate_limit_per_min,
        group_rate_limit_per_min=settings.group_rate_limit_per_min,
        refused_keep=settings.refused_keep,
        refused_digest_interval_seconds=settings.refused_digest_interval_seconds,
    )


def lane_config(settings: Settings) -> LaneConfig:
    return LaneConfig(
        owner_id=owners(settings),
        debounce_ms=settings.debounce_ms,
        max_concurrent_turns=settings.max_concurrent_turns,
        typing_delay_seconds=settings.typing_delay_seconds,
        typing_interval_seconds=settings.typing_interval_seconds,
    )


def send_limits(settings: Settings) -> SendLimits:
    """How many files a turn or task may send (`send_file`), and how large each may be."""
    return SendLimits(max_files=settings.send_files_max, max_bytes=settings.send_file_max_bytes)


def fire_retry(settings: Settings) -> FireRetry:
    """How a failed scheduled task's run is tried again, in every chamber."""
    return FireRetry(
        settings.schedule_task_attempts, settings.schedule_retry_base_seconds, settings.schedule_retry_cap_seconds
    )


def single_config(settings: Settings) -> SingleConfig:
    return SingleConfig(
        bot_name=settings.bot_name,
        owner_id=owners(settings),
        data_dir=settings.data_dir,
        sending=send_limits(settings),
        memory_inject_tokens=settings.memory_inject_tokens,
        memory_extraction=settings.memory_extraction,
        progress_note_after_seconds=settings.progress_note_after_seconds,
        session_compact_tokens=settings.session_compact_tokens,
        max_session_messages=settings.max_session_messages,
        scheduled_retry=fire_retry(settings),
    )


def offline_config(settings: Settings) -> OfflineConfig:
    from bicameral.offline import OfflineConfig

    return OfflineConfig(bot_name=settings.bot_name, data_dir=settings.data_dir, sending=send_limits(settings))


def front_config(settings: Settings) -> FrontConfig:
    return FrontConfig(
        bot_name=settings.bot_name,
        owner_id=owners(settings),
        data_dir=settings.data_dir,
        sending=send_limits(settings),
        memory_inject_tokens=settings.memory_inject_tokens,
        memory_extraction=settings.memory_extraction,
        front_max_tokens=settings.front_max_tokens,
        front_context_messages=settings.front_context_messages,
        short_result_chars=settings.short_result_chars,
        delivery_pause_scale=settings.delivery_pause_scale,
        status_interval_seconds=settings.status_interval_seconds,
        progress_interval_seconds=settings.progress_interval_seconds,
        away_after_seconds=settings.away_after_seconds,
        burst_followup_seconds=settings.burst_followup_seconds,
        task_max_attempts=settings.task_max_attempts,
        task_retry_delay_seconds=settings.task_retry_delay_seconds,
        scheduled_retry=fire_retry(settings),
    )


def back_config(settings: Settings) -> BackConfig:
    return BackConfig(
        owner_id=owners(settings),
        data_dir=settings.data_dir,
        sending=send_limits(settings),
        memory_inject_tokens=settings.memory_inject_tokens,
        task_compact_tokens=settings.task_compact_tokens,
    )


def claude_code_config(settings: Settings) -> ClaudeCodeConfig:
    """The CLI, its log-in and its supervision, for the Claude Code chamber and executor alike."""
    from bicameral.claude_code.config import ClaudeCodeConfig

    return ClaudeCodeConfig(
        data_dir=settings.data_dir,
        owner_id=owners(settings),
        binary=settings.claude_bin,
        model=settings.back.model,
        effort=settings.claude_effort,
        api_key=_secret(settings.anthropic_api_key),
        base_url=settings.anthropic_base_url,
        oauth_token=_secret(settings.claude_oauth_token),
        proxy=settings.claude_proxy,
        plugins_path=settings.resolved_plugins_path,
        liveness_timeout=settings.liveness_timeout_seconds,
        liveness_poll=settings.liveness_poll_seconds,
        backoff_base=settings.crash_backoff_base,
        backoff_cap=settings.crash_backoff_cap,
        crash_limit=settings.crash_limit,
        crash_window_seconds=settings.crash_window_seconds,
        tool_error_max=settings.tool_error_max_count,
        tool_error_window=settings.tool_error_window_seconds,
        secrets=tuple(settings.secret_values()),
        memory_inject_tokens=settings.memory_inject_tokens,
        sending=send_limits(settings),
    )


def claude_code_chamber_config(settings: Settings) -> ChamberConfig:
    from bicameral.claude_code.chamber import ChamberConfig

    return ChamberConfig(
        bot_name=settings.bot_name,
        progress_note_after_seconds=settings.progress_note_after_seconds,
        dropped_text_max_retries=settings.dropped_text_max_retries,
        compact_tokens=settings.claude_code_compact_tokens,
        scheduled_retry=fire_retry(settings),
    )


def model_config(settings: Settings) -> ModelConfig:
    """How the completion APIs are reached, and where the local model is."""
    return ModelConfig(
        data_dir=settings.data_dir,
        anthropic_api_key=_secret(settings.anthropic_api_key),
        anthropic_base_url=settings.anthropic_base_url,
        openai_api_key=_secret(settings.openai_api_key),
        openai_base_url=settings.openai_base_url,
        max_retries=settings.model_max_retries,
        timeout_seconds=settings.model_timeout_seconds,
        proxy_variables=settings.proxy_variables(),
        local_model_path=settings.local_model_path,
        local_context_tokens=settings.local_context_tokens,
    )


def telegram_config(settings: Settings) -> TelegramConfig:
    from bicameral.channels.telegram import TelegramConfig

    return TelegramConfig(
        token=settings.telegram_token,
        api_url=settings.telegram_api_url,
        poll_timeout=settings.telegram_poll_timeout,
        proxy_variables=settings.proxy_variables(),
        bot_name=settings.bot_name,
        data_dir=settings.data_dir,
        attachments_dir=settings.attachments_dir,
        typing_interval_seconds=settings.typing_interval_seconds,
    )


def owners(settings: Settings) -> Owners:
    """The owner's id on each channel: BICAMERAL_OWNER_ID on Telegram, BICAMERAL_MATRIX_OWNER_ID on Matrix."""
    return Owners.of(telegram=settings.owner_id, matrix=settings.matrix_owner_id)


def owner_chat(settings: Settings, channels: Sequence[Channel]) -> str | None:
    """Where the owner is told things outside any conversation: their DM on the first served channel that knows them
    (a Matrix user id stands for the DM with them; the channel finds or opens it)."""
    known = owners(settings)
    return next((chat_key(c.name, user) for c in channels if (user := known.on(c.name)) is not None), None)


def matrix_config(settings: Settings) -> MatrixConfig:
    from bicameral.channels.matrix import MatrixConfig
    from bicameral.gate.access import AccessPolicy

    if not settings.matrix_user_id:
        raise ConfigError("BICAMERAL_MATRIX_HOMESERVER is set but BICAMERAL_MATRIX_USER_ID is not")
    access: list[AccessPolicy] = []  # read when the first invite comes, once the app has made the data dir

    def may_invite(user: str) -> bool:
        """Whoever may write to the assistant directly (the owner, access.json's users) may invite it to a room."""
        if not access:
            access.append(AccessPolicy(settings.resolved_access_path, owners(settings)))
        return access[0].allows(Inbound("matrix", "matrix:" + user, "", Sender(user, user), "", 0.0))

    return MatrixConfig(
        homeserver=settings.matrix_homeserver or "",
        user_id=settings.matrix_user_id,
        access_token=settings.matrix_access_token,
        password=settings.matrix_password,
        data_dir=settings.data_dir,
        attachments_dir=settings.attachments_dir,
        session_file=settings.data_dir / "matrix" / "session.json",
        may_invite=may_invite,
    )


@dataclass(frozen=True)
class ReportConfig:
    """What the reports are told of the configuration (filled by `app/configs.py`'s `report_config`)."""

    data_dir: Path
    log_file: Path
    models: dict[str, str]  # each model the running mode calls (`provider:model`) → the parts it plays
    unread_plugins: str | None = None  # a plugins.json this mode does not read, by name


def report_config(settings: Settings, mode: str) -> ReportConfig:
    """What /health, /audit and /logs are told: where the data and the log are, which models run, unread plugins."""
    parts = [("front", settings.front_model)] if mode == "bicameral" else []
    parts.append(("back", settings.back_model))
    models: dict[str, list[str]] = {}
    for part, ref in parts:
        models.setdefault(ref, []).append(part)
    plugins = settings.resolved_plugins_path
    unread = plugins.name if settings.back.provider != "claude-code" and plugins.exists() else None
    return ReportConfig(
        data_dir=settings.data_dir,
        log_file=settings.logs_dir / "bicameral.log",
        models={ref: ", ".join(names) for ref, names in models.items()},
        unread_plugins=unread,
    )


def _secret(value: SecretStr | None) -> str | None:
    """A configured secret's value; an empty one counts as none."""
    return (value.get_secret_value() or None) if value is not None else None
