"""The Matrix tests' homeserver: one real Synapse per test session, and fresh users on it for each test."""

from __future__ import annotations

import itertools
import json

import pytest

from tests.support.synapse import Synapse

_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def synapse(tmp_path_factory):
    server = Synapse(tmp_path_factory.mktemp("synapse")).start()
    yield server
    server.stop()


@pytest.fixture
def matrix_user(synapse):
    """Register a new user (a unique localpart per call, so tests never share rooms or history)."""

    def make(name: str, displayname: str | None = None):
        return synapse.register(f"{name}{next(_numbers)}", displayname=displayname)

    return make


@pytest.fixture
async def matrix_app(make_settings, synapse, matrix_user):
    """Start the assistant serving Matrix (and Telegram too with `telegram=True`), as the bot user made here.

    `start(allowed=[...])` writes access.json first: those Matrix users may write to it and invite it. The same
    settings (the same data dir) are used by every start of one test, so a second start is a restart.
    """
    from bicameral.app import App, configured_channels

    bot = matrix_user("bot", "Archie")
    apps: list[App] = []

    async def start(*, allowed=(), telegram=False, extra_tools=(), **overrides) -> App:
        extra = {} if telegram else {"telegram_token": None}
        settings = make_settings(
            matrix_homeserver=synapse.url, matrix_user_id=bot.user_id, matrix_password=bot.password, **extra, **overrides
        )
        access = settings.resolved_access_path
        access.parent.mkdir(parents=True, exist_ok=True)
        access.write_text(json.dumps({"policy": "allowlist", "allowed_users": list(allowed), "allowed_chats": []}))
        app = App(settings, configured_channels(settings), extra_tools=list(extra_tools))
        await app.start()
        apps.append(app)
        return app

    start.bot = bot
    yield start
    for app in apps:
        await app.stop()


@pytest.fixture
async def human(synapse, matrix_user):
    """A person on the homeserver (nio); `human("bob")` makes more."""
    from tests.support.matrix_human import Human

    people: list[Human] = []

    def make(name: str = "ann", displayname: str | None = None) -> Human:
        person = Human(synapse.url, matrix_user(name, displayname or name.title()))
        people.append(person)
        return person

    yield make
    for person in people:
        await person.close()


def pytest_collection_modifyitems(items):
    """Tests that need the homeserver start a Synapse process: they are `slow` (`-m "not slow"` leaves them out)."""
    for item in items:
        if "synapse" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
