"""Command line: `bicameral run | chat | doctor | trace`."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import tomllib
from collections.abc import Callable, Sequence

import typer
from pydantic import ValidationError

from bicameral.app import App, configured_channels, prepare_data_dir
from bicameral.channels.base import Channel
from bicameral.config import Settings
from bicameral.errors import BicameralError
from bicameral.failures import failure_detail
from bicameral.observe.logs import setup_logging

cli = typer.Typer(add_completion=False, no_args_is_help=True, help="bicameral: a personal assistant that lives in chat.")
log = logging.getLogger("bicameral")


def main() -> None:
    cli()


@cli.command()
def run() -> None:
    """Serve every configured channel (Telegram by long polling)."""
    settings = _load_settings()
    _start_logging(settings, settings.log_level)
    _serve(settings, lambda: configured_channels(settings))


@cli.command()
def chat() -> None:
    """Talk to the assistant in this terminal."""
    from bicameral.channels.terminal import TerminalChannel

    settings = _load_settings()
    _start_logging(settings, "WARNING")
    _serve(settings, lambda: [TerminalChannel(bot_name=settings.bot_name)])


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
    from bicameral.claude_code import trace as tracing
    from bicameral.claude_code.capture import capture_dir

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


def _serve(settings: Settings, channels: Callable[[], Sequence[Channel]]) -> None:
    """Run the app on the channels until a signal, a channel's end or a fatal error; exit with its status."""

    async def serve() -> int:
        app = App(settings, channels())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, app.request_stop)
        async with app:
            await app.wait()
        return app.exit_code

    try:
        code = asyncio.run(serve())
    except BicameralError as exc:
        _fail(str(exc))
    except Exception as exc:
        detail = failure_detail(exc)
        log.error("fatal error: %s", detail)
        _fail(detail.splitlines()[-1])  # the scrubbed "Type: message" line; the traceback is in the log
    if code:
        sys.exit(code)


def _start_logging(settings: Settings, level: str) -> None:
    """Log to the console and under the data dir; an unusable data dir ends here with what to fix."""
    try:
        prepare_data_dir(settings)
        setup_logging(level, settings.logs_dir, settings.secret_values(), keep_days=settings.log_keep_days)
    except BicameralError as exc:
        _fail(str(exc))


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
