"""Command line: `bicameral run | chat | doctor | trace | backup | restore | migrate-db`."""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError

from bicameral.app import App, configured_channels, model_config, prepare_data_dir
from bicameral.app.serving import turn_to_serve
from bicameral.channels.base import Channel
from bicameral.config import Settings
from bicameral.errors import BicameralError
from bicameral.failures import failure_detail
from bicameral.models.base import Model
from bicameral.observe.logs import setup_logging

if TYPE_CHECKING:
    import typer

log = logging.getLogger("bicameral")
# In a terminal a message is sent with Enter and pasted lines arrive together: a short wait joins a paste into one
# turn without holding every answer back (the chat apps' default is for people who send a message in pieces).
TERMINAL_DEBOUNCE_MS = 250


def main() -> None:
    """Run a command; `run` and `chat` take no options, so they skip loading typer (and click) at all."""
    args = sys.argv[1:]
    if len(args) == 1 and args[0] in _PLAIN_COMMANDS:
        _PLAIN_COMMANDS[args[0]]()
        return
    _typer_app()()


def run() -> None:
    """Serve every configured channel (Telegram by long polling)."""
    settings = _load_settings()
    _start_logging(settings, settings.log_level)
    _serve(settings, lambda: configured_channels(settings))


def chat() -> None:
    """Talk to the assistant in this terminal."""
    from bicameral.channels.terminal import TerminalChannel

    settings = terminal_settings(_load_settings())
    _start_logging(settings, "WARNING")
    terminal = TerminalChannel(bot_name=settings.bot_name)
    _serve(settings, lambda: [terminal], back_model=lambda: live_back_model(settings, terminal.show_partial))


def terminal_settings(settings: Settings) -> Settings:
    """The settings for a conversation in the terminal: a short debounce unless one is set."""
    if "debounce_ms" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"debounce_ms": TERMINAL_DEBOUNCE_MS})


def live_back_model(settings: Settings, show: Callable[[str], None]) -> Model | None:
    """For a terminal on the local model: that model, its tokens shown as they come; else None (the app builds it).

    Only the local model: it calls no tools, so everything it streams is the reply itself.
    """
    if settings.back.provider != "local" or settings.effective_mode != "single":
        return None
    from bicameral.models import build_model
    from bicameral.models.echo import EchoText

    return EchoText(build_model(settings.back_model, model_config(settings)), show)


def doctor(live: bool = False) -> None:
    """Check the configuration and every dependency, and say what to fix; --live: only whether the assistant runs."""
    from bicameral.doctor import live_check, run_checks

    settings = _load_settings()
    if live:
        result = live_check(settings)
        print(f"{result.name}: {result.detail}")
        sys.exit(0 if result.ok else 1)
    setup_logging("ERROR", None, settings.secret_values())
    ok = asyncio.run(run_checks(settings))
    sys.exit(0 if ok else 1)


_PLAIN_COMMANDS: dict[str, Callable[[], None]] = {"run": run, "chat": chat, "doctor": doctor}


def _typer_app() -> typer.Typer:
    """The full command line, with help and options (typer is loaded only here)."""
    import typer

    app = typer.Typer(add_completion=False, no_args_is_help=True, help="bicameral: a personal assistant that lives in chat.")
    for command in _PLAIN_COMMANDS.values():
        app.command()(command)

    @app.command()
    def trace(
        session: str = typer.Option("", "--session", help="Session id (a unique prefix is enough); default: the latest."),
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events until Ctrl-C."),
        list_sessions: bool = typer.Option(False, "--list", help="List the captured sessions and exit."),
        max_chars: int = typer.Option(400, "--max", help="Cut each block to this many characters (0: no limit)."),
    ) -> None:
        """Replay a Claude Code executor session from the wire capture, or follow a live one."""
        _trace(session, follow, list_sessions, max_chars, typer.echo)

    new_backup = typer.Argument(..., help="A new folder, or a file ending in .tar, .tar.gz or .tgz.")
    made_backup = typer.Argument(..., help="A folder or tar file made by `bicameral backup`.")

    @app.command()
    def backup(path: Path = new_backup) -> None:
        """Back the data dir up (the database, memory, instructions, skills, workspaces, access and plugins files),
        the assistant running or not."""
        _backup(path, typer.echo)

    @app.command()
    def restore(path: Path = made_backup) -> None:
        """Replace the data dir's content with a backup's (the assistant stopped); what it held is kept aside."""
        _restore(path, typer.echo)

    @app.command(name="migrate-db")
    def migrate_db(
        to: str = typer.Option(..., "--to", help="postgresql://user:password@host:port/name of an empty database."),
    ) -> None:
        """Copy the data dir's SQLite database into an empty PostgreSQL database (the assistant stopped)."""
        _migrate_db(to, typer.echo)

    return app


def _backup(path: Path, echo: Callable[[str], Any]) -> None:
    from bicameral.app.backups import backup_to

    settings = _load_settings()
    try:
        manifest = backup_to(settings, path)
    except (BicameralError, OSError) as exc:
        _fail(f"no backup made: {exc}")
    echo(f"backed up {len(manifest.files)} files ({manifest.total_bytes} bytes) of instance {manifest.instance_id} into {path}")
    if manifest.database == "postgresql":
        echo("the PostgreSQL database is in it as postgresql.dump (pg_dump's custom format); restore loads it")


def _restore(path: Path, echo: Callable[[str], Any]) -> None:
    from bicameral.app.backups import restore_from

    settings = _load_settings()
    try:
        restored = restore_from(settings, path)
    except (BicameralError, OSError) as exc:
        _fail(f"nothing restored: {exc}")
    made = restored.manifest
    echo(f"restored {len(made.files)} files from {path} into {settings.data_dir}")
    if made.database == "postgresql":
        echo("the database was loaded from the backup's postgresql.dump into BICAMERAL_DATABASE_URL's database")
    if restored.aside is not None:
        echo(f"what the data dir held before is in {restored.aside}")


def _migrate_db(url: str, echo: Callable[[str], Any]) -> None:
    import sqlite3

    from bicameral.app.migrate_db import hide_password, migrate_db
    from bicameral.redaction import without_password

    settings = _load_settings()
    try:
        done = migrate_db(settings.data_dir, settings.db_path, url)
    except (BicameralError, OSError, sqlite3.Error) as exc:
        _fail("nothing migrated: " + hide_password(" ".join(str(exc).split()), url))
    echo(
        f"copied {len(done.rows)} tables ({done.total} rows) from {settings.db_path} into {without_password(url)} "
        f"in {done.seconds:.1f} s (the memory index is rebuilt from the memory files at the first start)"
    )
    echo(f"next: set BICAMERAL_DATABASE_URL={without_password(url)} (with its real password) and start bicameral")


def __getattr__(name: str) -> Any:
    # `from bicameral.cli import cli` (tests, embedding) still gets the typer app, built on first use.
    if name == "cli":
        return _typer_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _trace(session: str, follow: bool, list_sessions: bool, max_chars: int, echo: Callable[[str], Any]) -> None:
    from bicameral.claude_code import trace as tracing
    from bicameral.claude_code.capture import capture_dir

    settings = _load_settings()
    root = capture_dir(settings.data_dir)
    if list_sessions:
        sessions = tracing.list_sessions(root)
        if not sessions:
            _fail(f"no captured Claude Code sessions under {root}")
        for line in tracing.format_listing(sessions):
            echo(line)
        return
    try:
        chosen = tracing.find_session(root, session or None)
    except tracing.TraceError as exc:
        _fail(str(exc))
    echo(f"session {chosen.session_id} ({chosen.label}{', live' if chosen.live else ''})")
    offset = tracing.render(chosen.path, echo, max_chars)
    if follow:
        try:
            tracing.follow(chosen.path, echo, max_chars, offset=offset)
        except KeyboardInterrupt:
            pass


def _serve(
    settings: Settings,
    channels: Callable[[], Sequence[Channel]],
    back_model: Callable[[], Model | None] = lambda: None,
) -> None:
    """Run the app on the channels until a signal, a channel's end or a fatal error; exit with its status."""

    async def serve() -> int:
        stopping = asyncio.Event()
        running: list[App] = []

        def stop() -> None:
            stopping.set()
            for app in running:
                app.request_stop()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop)
        # With PostgreSQL, several workers may share the database: this one serves only once it holds its lock.
        url = settings.database_url.get_secret_value() if settings.database_url is not None else None
        async def run_app(helper: bool, done: asyncio.Event) -> int:
            back = back_model()
            app = App(settings, channels(), back_model=back, helper=helper)
            running.append(app)
            if done.is_set():
                app.request_stop()
            try:
                async with app:
                    ended = asyncio.create_task(done.wait())
                    ended.add_done_callback(lambda _: app.request_stop())
                    await app.wait()
                    ended.cancel()
            finally:
                running.remove(app)
                if back is not None:
                    await back.aclose()  # the app closes only the models it built
            return app.exit_code

        # While another worker serves, this one runs turns for the chats it takes (PostgreSQL only).
        async with turn_to_serve(url, stopping, meanwhile=functools.partial(run_app, True)) as serving:
            if not serving:
                return 0  # stopped while standing by
            return await run_app(False, stopping)

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


def _fail(message: str) -> NoReturn:
    print(f"bicameral: {message}", file=sys.stderr)
    sys.exit(2)
