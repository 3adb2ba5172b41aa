"""The web dashboard and its chat (off unless BICAMERAL_DASHBOARD_PORT is set; Starlette and uvicorn load only then)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from bicameral.console.audit import AuditSources
from bicameral.console.desk import Console, OwnerCommand
from bicameral.dashboard.auth import Logins
from bicameral.dashboard.chat import WebChannel
from bicameral.dashboard.command import dashboard_command
from bicameral.dashboard.feed import LiveFeed
from bicameral.dashboard.server import EVERY_ADDRESS, DashboardConfig, build_app
from bicameral.dashboard.sources import Sources
from bicameral.types import Clock

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger(__name__)
TRANSCRIPT_LOGGER = "bicameral.tx"

__all__ = ["Dashboard", "DashboardConfig", "Sources"]


class Dashboard:
    """The dashboard's server on its own socket, the live feed on the transcript, and the /dashboard command."""

    def __init__(
        self, config: DashboardConfig, redact: Callable[[str], str], *,
        sources: Sources | None = None, clock: Clock = time.time,
    ) -> None:
        self.config = config
        self.logins = Logins(clock=clock)
        self.channel = WebChannel(config.bot_name, clock=clock)  # the app serves it like its other channels
        self._redact = redact
        self._sources = replace(sources or Sources(), audit=lambda: self._audit)
        self._audit: AuditSources | None = None
        self._clock = clock
        self._feed: LiveFeed | None = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = config.port
        self._console: Console | None = None

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.config.host in EVERY_ADDRESS else self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    @property
    def watching(self) -> int:
        """How many pages have the live stream open."""
        return self._feed.subscribers if self._feed is not None else 0

    def command(self) -> OwnerCommand:
        return dashboard_command(self.logins, self.base_url, self._end_streams)

    def attach(self, console: Console) -> None:
        """Add /dashboard to the console, whose reports the status page shows."""
        self._console = console
        console.add([self.command()])

    def show_audit(self, audit: AuditSources) -> None:
        """/audit's own sources (built with the console): the skills, plugins and refused-senders pages read them."""
        self._audit = audit

    def _owner_commands(self) -> tuple[OwnerCommand, ...]:
        return self._console.owner_commands if self._console is not None else ()

    async def start(self) -> None:
        import uvicorn

        self._feed = LiveFeed(asyncio.get_running_loop(), self._redact)
        logging.getLogger(TRANSCRIPT_LOGGER).addHandler(self._feed)
        self.channel.publish = self._feed.publish
        self.channel.retract = self._feed.retract
        family = socket.AF_INET6 if ":" in self.config.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.host, self.config.port))  # bound before start returns: the link works at once
        self.port = sock.getsockname()[1]
        config = DashboardConfig(self.config.host, self.port, self.config.bot_name, self.config.memory_dir)
        app = build_app(config, self.logins, self._feed, self.channel, self._owner_commands, self._sources,
                        self._clock)
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                               timeout_graceful_shutdown=2))
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[sock]), name="dashboard")
        log.info("dashboard on %s", self.base_url)

    def _end_streams(self) -> None:
        if self._feed is not None:
            self._feed.close_all()

    async def stop(self) -> None:
        if self._feed is not None:
            logging.getLogger(TRANSCRIPT_LOGGER).removeHandler(self._feed)
            self._feed.close_all()
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 5)
