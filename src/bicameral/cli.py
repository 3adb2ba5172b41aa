"""Command line: `bicameral run | chat | doctor`."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import tomllib
from collections.abc import Sequence

import typer
from pydantic import ValidationError

from bicameral.app import App, ConfigError, configured_channels
from bicameral.channels.base import Channel, ChannelStartError
from bicameral.config import Settings
from bicameral.observe.logs import setup_logging

cli = typer.Typer(add_completion=False, no_args_is_help=True, help="bicameral: a personal assistant that lives in chat.")
log = logging.getLogger("bicameral")


def main() -> None:
    cli()


@cli.command()
def run() -> None:
    """Serve every configured channel (Telegram by long polling)."""
    settings = _load_settings()
    setup_logging(settings.log_level, settings.logs_dir, settings.secret_values(), keep_days=settings.log_keep_days)
    try:
        channels = configured_channels(settings)
    except ConfigError as exc:
        _fail(str(exc))
    _serve(settings, channels)


@cli.command()
def chat() -> None:
    """Talk to the assistant in this terminal."""
    from bicameral.channels.terminal import TerminalChannel

    settings = _load_settings()
    setup_logging("WARNING", settings.logs_dir, settings.secret_values(), keep_days=settings.log_keep_days)
    terminal = TerminalChannel(bot_name=settings.bot_name)
    _serve(settings, [terminal], on_ready=lambda app: setattr(terminal, "_on_eof", app.request_stop))


@cli.command()
def doctor() -> None:
    """Check the configuration and every dependency, and say what to fix."""
    from bicameral.doctor import run_checks

    settings = _load_settings()
    setup_logging("ERROR", None, settings.secret_values())
    ok = asyncio.run(run_checks(settings))
    raise typer.Exit(0 if ok else 1)


def _serve(settings: Settings, channels: Sequence[Channel], on_ready=None) -> None:
    async def serve() -> None:
        app = App(settings, channels)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, app.request_stop)
        if on_ready is not None:
            on_ready(app)
        try:
            await app.start()
            await app.wait()
        finally:
            await app.stop()

    try:
        asyncio.run(serve())
    except (ConfigError, ChannelStartError) as exc:
        _fail(str(exc))
    except Exception as exc:
        log.exception("fatal error")
        _fail(f"{type(exc).__name__}: {exc}")


def _load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        lines = [f"  {'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()]
        _fail("the configuration is invalid:\n" + "\n".join(lines))
    except tomllib.TOMLDecodeError as exc:
        _fail(f"bicameral.toml (in the working directory) is not valid TOML: {exc}")
    except Exception as exc:  # e.g. an unreadable .env or bicameral.toml
        _fail(f"the configuration could not be read: {exc}")


def _fail(message: str) -> None:
    typer.echo(f"bicameral: {message}", err=True)
    sys.exit(2)
