"""Command line: `bicameral run | chat | doctor | trace`."""

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


@cli.command()
def trace(
    session: str = typer.Option("", "--session", help="Session id (a unique prefix is enough); default: the latest."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events until Ctrl-C."),
    list_sessions: bool = typer.Option(False, "--list", help="List the captured sessions and exit."),
    max_chars: int = typer.Option(400, "--max", help="Cut each block to this many characters (0: no limit)."),
) -> None:
    """Replay a Claude Code executor session from the wire capture, or follow a live one."""
    from bicameral.claude_code.capture import capture_dir
    from bicameral.observe import trace as tracing

    settings = _load_settings()
    root = capture_dir(settings.data_dir)
    if list_sessions:
        sessions = tracing.list_sessions(root)
        if not sessions:
            _fail(f"no captured Claude Code sessions under {root}")
        for line in tracing.format_listing(sessions):
            typer.echo(line)
        return
    try:
        chosen = tracing.find_session(root, session or None)
    except tracing.TraceError as exc:
        _fail(str(exc))
    typer.echo(f"session {chosen.session_id} ({chosen.label}{', live' if chosen.live else ''})")
    offset = tracing.render(chosen.path, typer.echo, max_chars)
    if follow:
        try:
            tracing.follow(chosen.path, typer.echo, max_chars, offset=offset)
        except KeyboardInterrupt:
            pass


def _serve(settings: Settings, channels: Sequence[Channel], on_ready=None) -> None:
    async def serve() -> int:
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
        return app.exit_code

    try:
        code = asyncio.run(serve())
    except (ConfigError, ChannelStartError) as exc:
        _fail(str(exc))
    except Exception as exc:
        log.exception("fatal error")
        _fail(f"{type(exc).__name__}: {exc}")
    if code:
        sys.exit(code)


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
