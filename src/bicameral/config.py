"""The one Settings object: env, `.env` and `bicameral.toml`; nothing else reads the environment."""

from __future__ import annotations

import re
from ipaddress import ip_network
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

PROVIDERS = ("anthropic", "openai", "local", "claude-code")
DEFAULT_TELEGRAM_API_URL = "https://api.telegram.org"
_DEFAULT_BACK = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4.1"}
_DEFAULT_FRONT = {"anthropic": "anthropic:claude-haiku-4-5", "openai": "openai:gpt-4.1-mini"}


class ModelRef(str):
    """A `provider:model` reference such as `anthropic:claude-sonnet-4-5`."""

    @property
    def provider(self) -> str:
        return self.split(":", 1)[0]

    @property
    def model(self) -> str:
        return self.split(":", 1)[1] if ":" in self else ""


def parse_model_ref(value: str) -> ModelRef:
    """Validate `provider:model`; a bare provider is allowed only for `local`."""
    value = value.strip()
    provider = value.split(":", 1)[0]
    if provider not in PROVIDERS:
        raise ValueError(
            f"unknown model provider {provider!r} in {value!r}; use one of {', '.join(PROVIDERS)} "
            "as provider:model, e.g. anthropic:claude-sonnet-4-5"
        )
    if provider != "local" and (":" not in value or not value.split(":", 1)[1]):
        raise ValueError(f"{value!r} names no model; write it as {provider}:<model>")
    return ModelRef(value)


_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


def allow_host_entry(entry: str) -> str:
    """One BICAMERAL_WEB_ALLOW_HOSTS entry normalised (a network as CIDR, a name in lower case); ValueError otherwise."""
    entry = entry.strip()
    try:
        return str(ip_network(entry, strict=False))
    except ValueError:
        pass
    name = entry.rstrip(".").lower()
    labels = name.split(".")
    if len(name) <= 253 and all(_HOST_LABEL.match(label) for label in labels) and not labels[-1].isdigit():
        return name
    raise ValueError(
        f"{entry[:100]!r} is neither a host name (nas.local), an address (192.168.1.20) nor a CIDR block "
        "(192.168.1.0/24); list them separated by commas"
    )


class Settings(BaseSettings):
    """Every setting bicameral reads; docs/configuration.md says what each one does."""

    model_config = SettingsConfigDict(env_prefix="BICAMERAL_", env_file=".env", env_file_encoding="utf-8",
                                      toml_file="bicameral.toml", extra="ignore", populate_by_name=True,
                                      hide_input_in_errors=True)  # a bad value may hold a secret: errors never echo it

    # --- channels ---
    telegram_token: SecretStr | None = None
    telegram_api_url: str = DEFAULT_TELEGRAM_API_URL
    telegram_poll_timeout: int = Field(default=25, ge=0, le=50)
    owner_id: int | None = None
    bot_name: str = "bicameral"
    matrix_homeserver: str | None = None  # set: serve Matrix (beside Telegram when its token is set too)
    matrix_user_id: str | None = None
    matrix_access_token: SecretStr | None = None
    matrix_password: SecretStr | None = None  # a login whose token and device id are kept in the data dir
    matrix_owner_id: str | None = None  # the owner's Matrix user id (@you:example.org)

    # --- storage ---
    data_dir: Path = Path("./data")
    database_url: SecretStr | None = None  # postgresql://user:password@host/db: PostgreSQL; unset: SQLite in the data dir
    chat_lease_seconds: float = Field(default=30.0, ge=2.0, le=3600.0)  # with PostgreSQL: a chat's lease on one worker
    access_path: Path | None = None
    backup_dir: Path | None = None  # the nightly backups; unset: `backups` beside the data dir
    backup_keep: int = Field(default=7, ge=0)  # nightly backups kept; 0: none made

    # --- chambers and models ---
    mode: Literal["single", "bicameral"] = "bicameral"
    back_model: str = "local"
    front_model: str = "local"
    max_tokens: int = Field(default=4096, ge=64)
    model_max_retries: int = Field(default=4, ge=0, le=10)
    model_timeout_seconds: float = Field(default=120.0, gt=0)
    local_model_path: Path | None = None
    local_context_tokens: int = Field(default=4096, ge=512)
    transcription_base_url: str | None = None  # voice notes; unset: OpenAI's with OPENAI_API_KEY, `off`: none
    transcription_model: str = "whisper-1"
    transcription_api_key: SecretStr | None = None  # unset: OPENAI_API_KEY
    transcription_offline: Literal["auto", "on", "off"] = "auto"  # auto: the offline model when no endpoint is set
    prices_path: Path | None = None  # the owner's prices (USD per million tokens) for /cost, over the list prices
    # Spending caps, in tokens per UTC day (input and output, every model): per person other than the owner, and for
    # everyone together, owner included. Unset: no cap.
    user_daily_tokens: int | None = Field(default=None, ge=0)
    daily_tokens: int | None = Field(default=None, ge=0)

    # --- conversation engine ---
    debounce_ms: int = Field(default=1500, ge=0)
    typing_interval_seconds: float = Field(default=4.0, gt=0)
    # An answer quicker than this needs no "typing…" first, and the turn's model request goes out
    # without a Bot API call beside it.
    typing_delay_seconds: float = Field(default=0.5, ge=0)
    # Providers meter requests and tokens per minute, not concurrent requests (a 429 is retried), and a
    # running turn costs about 0.1 MB: the cap only guards against runaway load, so a burst of a few
    # hundred chats runs in one wave. Bot API calls have their own, smaller, in-flight cap.
    max_concurrent_turns: int = Field(default=256, ge=1)
    max_inbound_chars: int = Field(default=16000, ge=100)
    rate_limit_per_min: int = Field(default=20, ge=0)
    send_retry_base_seconds: float = Field(default=1.0, gt=0)
    send_retry_cap_seconds: float = Field(default=300.0, gt=0)
    send_give_up_seconds: float = Field(default=86400.0, gt=0)
    group_member_rate_limit_per_min: int = Field(default=10, ge=0)
    group_rate_limit_per_min: int = Field(default=30, ge=0)
    refused_keep: int = Field(default=1000, ge=1)
    refused_digest_interval_seconds: float = Field(default=3600.0, ge=0)

    # --- two chambers (bicameral mode) ---
    front_max_tokens: int = Field(default=1000, ge=64)
    front_context_messages: int = Field(default=20, ge=0)
    short_result_chars: int = Field(default=600, ge=0)
    delivery_pause_scale: float = Field(default=1.0, ge=0)
    status_interval_seconds: float = Field(default=180.0, gt=0)
    # Single mode and the Claude Code chamber: a turn still working after this long shows a progress note.
    progress_note_after_seconds: float = Field(default=15.0, ge=0)
    progress_interval_seconds: float = Field(default=5.0, ge=0)
    away_after_seconds: float = Field(default=1800.0, gt=0)
    burst_followup_seconds: float = Field(default=45.0, gt=0)
    task_max_attempts: int = Field(default=2, ge=1)
    task_retry_delay_seconds: float = Field(default=30.0, ge=0)

    # --- native runner ---
    max_iterations: int = Field(default=20, ge=1)
    tool_error_max_count: int = Field(default=3, ge=1)
    tool_error_window_seconds: float = Field(default=60.0, gt=0)
    tool_timeout_seconds: float = Field(default=120.0, gt=0)
    # How long an external MCP server (plugins.json `mcps`) may take to start and list its tools.
    plugin_start_timeout_seconds: float = Field(default=20.0, gt=0)
    # How long `ask_user` waits for the person's answer before it goes on with "no answer".
    ask_timeout_seconds: float = Field(default=600.0, gt=0)
    # How long a tool call waits for the owner's Approve or Deny (ask_before, untrusted content) before it is denied.
    approval_timeout_seconds: float = Field(default=600.0, gt=0)
    sandbox_bwrap: str = "bwrap"  # bubblewrap for the `run` tool; where it cannot run, `run` is not offered
    command_timeout_seconds: float = Field(default=30.0, gt=0)  # one call of an owner-made command (<data>/commands)
    chromium_path: Path = Path("/usr/lib/chromium/chromium")  # render_html/render_latex: Debian's binary, not /usr/bin's
    # The disk that holds the data: a chat's workspace may hold this much (a `run` growing it further is stopped),
    # and this much stays free for the database (no `run` starts or goes on below it; a file of this size is kept
    # in the data dir and given back to the database when the disk fills anyway). 0 turns the reserve off.
    workspace_quota_mb: int = Field(default=1024, ge=1)
    disk_reserve_mb: int = Field(default=128, ge=0)
    # `send_file`: files one turn or task may send, and the size of each (Telegram's bots upload at most 50 MB).
    send_files_max: int = Field(default=10, ge=1, le=50)
    send_file_max_bytes: int = Field(default=20_000_000, ge=1024, le=50_000_000)
    # A sent file's copy goes once it is out; one nothing still sends is deleted at start after this long.
    outgoing_keep_days: float = Field(default=7.0, gt=0)
    # A document people send larger than this is not read (a note says so); Telegram's bots download at most 20 MB.
    document_max_mb: int = Field(default=20, ge=1, le=2000)
    web_fetch_max_bytes: int = Field(default=2_000_000, ge=1024)
    web_fetch_timeout_seconds: float = Field(default=20.0, gt=0)
    web_fetch_max_redirects: int = Field(default=5, ge=0, le=20)
    web_search_timeout_seconds: float = Field(default=15.0, gt=0)
    # Hosts, addresses and CIDR blocks that web_fetch and the browser may reach although they are private (a home
    # server): comma-separated in the environment, a list in bicameral.toml. Cloud metadata addresses stay refused.
    web_allow_hosts: Annotated[tuple[str, ...] | None, NoDecode] = None
    browser_timeout_seconds: float = Field(default=20.0, gt=0)  # one browser action, a navigation's loading included
    browser_idle_seconds: float = Field(default=300.0, gt=0)  # a chat's unused browser page is closed after this
    browser_download_max_bytes: int = Field(default=50_000_000, ge=1024)  # the largest download kept
    sub_agent_max_iterations: int = Field(default=10, ge=1)  # sub_agent's own step limit, below the parent's
    max_session_messages: int = Field(default=60, ge=4)

    # --- memory ---
    memory_inject_tokens: int = Field(default=400, ge=0)  # 0: never put remembered facts into prompts
    memory_committed_dir: Path | None = None  # a read-only memory folder, e.g. in the owner's own repository
    memory_extraction: bool = False  # after each reply, ask the model (the front's) for facts worth keeping
    session_compact_tokens: int = Field(default=24000, ge=0)  # single mode: summarise older turns past this (0 = never)
    task_compact_tokens: int = Field(default=48000, ge=0)  # a back task's transcript: the same, for the native executor
    # The Claude Code CLI's session: past this many input tokens, facts are flushed and the CLI's /compact runs.
    claude_code_compact_tokens: int = Field(default=120000, ge=0)

    # --- reminders and scheduled tasks ---
    timezone: str = "UTC"  # the owner's IANA zone; anyone else's until they set theirs with /timezone
    schedules_per_user: int = Field(default=50, ge=1)
    schedule_min_interval_seconds: float = Field(default=300.0, ge=1)  # refuses "every second"
    # A scheduled task whose run fails (model or executor error) is tried this many times in all, with backoff.
    schedule_task_attempts: int = Field(default=3, ge=1)
    schedule_retry_base_seconds: float = Field(default=30.0, gt=0)
    schedule_retry_cap_seconds: float = Field(default=600.0, gt=0)
    self_reflection: bool = False  # the daily review that proposes lessons to the owner (needs owner_id)
    self_reflection_cron: str = "0 0 * * *"  # when it runs, on UTC

    # --- Claude Code executor (BICAMERAL_BACK_MODEL=claude-code:<model>) ---
    # The `claude` CLI runs the turns; these bound how it is run and supervised.
    claude_bin: str = "claude"
    claude_effort: Literal["low", "medium", "high", "max"] = "medium"
    # A subscription token from `claude setup-token`: with no API key, how the CLI logs in (its config dir is private).
    claude_oauth_token: SecretStr | None = Field(default=None, validation_alias="CLAUDE_CODE_OAUTH_TOKEN")
    # The CLI inherits no proxy from our environment; this one is handed to it as HTTPS_PROXY/HTTP_PROXY.
    claude_proxy: str | None = None
    liveness_timeout_seconds: float = Field(default=300.0, gt=0)
    liveness_poll_seconds: float = Field(default=30.0, gt=0)
    crash_backoff_base: float = Field(default=2.0, gt=0)
    crash_backoff_cap: float = Field(default=64.0, gt=0)
    crash_limit: int = Field(default=10, ge=1)
    crash_window_seconds: float = Field(default=600.0, gt=0)
    dropped_text_max_retries: int = Field(default=3, ge=0)
    plugins_path: Path | None = None

    # --- observability ---
    log_level: str = "INFO"
    log_keep_days: int = Field(default=7, ge=1)
    dashboard_port: int | None = Field(default=None, ge=0, le=65535)  # set: serve the web dashboard (0: any free port)
    dashboard_host: str = "127.0.0.1"  # where the dashboard listens; another address opens it to that network

    # --- the model SDKs' own variables (read here so nothing else touches os.environ) ---
    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, validation_alias="ANTHROPIC_BASE_URL")
    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, validation_alias="OPENAI_BASE_URL")

    # --- the standard proxy variables, for the Bot API and model API connections (web fetches go direct) ---
    https_proxy: str | None = Field(default=None, validation_alias="HTTPS_PROXY")
    http_proxy: str | None = Field(default=None, validation_alias="HTTP_PROXY")
    all_proxy: str | None = Field(default=None, validation_alias="ALL_PROXY")
    no_proxy: str | None = Field(default=None, validation_alias="NO_PROXY")

    def proxy_variables(self) -> dict[str, str]:
        """The proxy variables that are set, by their usual names."""
        values = {"HTTPS_PROXY": self.https_proxy, "HTTP_PROXY": self.http_proxy}
        values |= {"ALL_PROXY": self.all_proxy, "NO_PROXY": self.no_proxy}
        return {name: value for name, value in values.items() if value}

    @field_validator("back_model", "front_model")
    @classmethod
    def _check_model_ref(cls, value: str) -> str:
        return parse_model_ref(value)

    @model_validator(mode="after")
    def _default_models(self) -> Settings:
        """With no model named, use the provider whose key is configured, else the bundled local model."""
        for name, defaults in (("back_model", _DEFAULT_BACK), ("front_model", _DEFAULT_FRONT)):
            if name in self.model_fields_set:
                continue
            if self.anthropic_api_key is not None:
                setattr(self, name, defaults["anthropic"])
            elif self.openai_api_key is not None:
                setattr(self, name, defaults["openai"])
        return self

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: SecretStr | None) -> SecretStr | None:
        # Only the scheme is ever quoted back: the rest of the URL holds the password.
        url = value.get_secret_value().strip() if value is not None else ""
        scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]{0,19})://", url)
        if url and (scheme is None or scheme[1].lower() not in ("postgresql", "postgres")):
            given = f"{scheme[1]}://…" if scheme else "one without a scheme"
            raise ValueError(f"BICAMERAL_DATABASE_URL must be a postgresql://user:password@host/database URL, not {given} "
                             "(leave it unset for SQLite in the data dir)")
        return SecretStr(url) if url else None

    @field_validator("web_allow_hosts", mode="before")
    @classmethod
    def _check_allow_hosts(cls, value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        entries = value.split(",") if isinstance(value, str) else list(value)
        return tuple(allow_host_entry(str(entry)) for entry in entries if str(entry).strip())

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}: use an IANA name like Europe/Berlin") from None
        return value

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        value = value.upper()
        if value not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("log_level must be DEBUG, INFO, WARNING or ERROR")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            dotenv_settings,
            TomlConfigSettingsSource(settings_cls),
        )

    @classmethod
    def for_test(cls, tmp_path: Path, **overrides: Any) -> Settings:
        """Settings isolated from the environment and files, rooted at `tmp_path`."""
        # Any: each value goes to its own field, and pydantic validates it there.
        values: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "debounce_ms": 0,
            "back_model": "openai:test-model",
            "front_model": "openai:test-front",
            "disk_reserve_mb": 1,  # every test's data dir would otherwise hold a 128 MB reserve file
        }
        values.update(overrides)
        return _IsolatedSettings(**values)

    # --- derived paths ---
    @property
    def db_path(self) -> Path:
        return self.data_dir / "bicameral.db"

    @property
    def database_location(self) -> str | Path:
        """The PostgreSQL URL (password included) when BICAMERAL_DATABASE_URL is set, else the SQLite file."""
        return self.database_url.get_secret_value() if self.database_url is not None else self.db_path

    @property
    def resolved_access_path(self) -> Path:
        return self.access_path or self.data_dir / "access.json"

    @property
    def attachments_dir(self) -> Path:
        return self.data_dir / "attachments"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def resolved_plugins_path(self) -> Path:
        return self.plugins_path or self.data_dir / "plugins.json"

    @property
    def resolved_prices_path(self) -> Path:
        return self.prices_path or self.data_dir / "prices.json"

    @property
    def back(self) -> ModelRef:
        return ModelRef(self.back_model)

    @property
    def front(self) -> ModelRef:
        return ModelRef(self.front_model)

    @property
    def effective_mode(self) -> str:
        """`bicameral` needs a front that can call tools; the bundled local model cannot."""
        if self.mode == "bicameral" and "local" in (self.front.provider, self.back.provider):
            return "single"
        return self.mode

    def secret_values(self) -> list[str]:
        """Every configured secret, so log filters can redact them verbatim (the database's password alone too)."""
        found = [s.get_secret_value() for s in vars(self).values() if isinstance(s, SecretStr) and s.get_secret_value()]
        password = urlsplit(self.database_url.get_secret_value()).password if self.database_url is not None else None
        return found + sorted({password, unquote(password)}) if password else found  # as written, and as decoded


class _IsolatedSettings(Settings):
    """Settings that read only their init arguments (tests must not see the developer's env)."""

    model_config = SettingsConfigDict(**{**Settings.model_config, "toml_file": None, "env_file": None})

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)
