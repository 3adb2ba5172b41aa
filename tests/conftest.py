"""Shared fixtures: the fake Telegram server, the scripted model server, and a running assistant."""

from __future__ import annotations

import pytest

from bicameral.app import App, telegram_config
from bicameral.config import Settings
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_server import FakeTelegram

OWNER = 1001


@pytest.fixture
def telegram():
    fake = FakeTelegram().start()
    yield fake
    fake.stop()


@pytest.fixture
def models():
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def make_settings(tmp_path, telegram, models):
    """Settings wired to the fakes; keyword overrides win."""

    def make(**overrides) -> Settings:
        values = dict(
            telegram_token=telegram.token,
            telegram_api_url=telegram.url,
            telegram_poll_timeout=1,
            owner_id=OWNER,
            mode="single",
            back_model="openai:back",
            front_model="openai:front",
            openai_api_key="test-key",
            openai_base_url=models.openai_url,
            model_max_retries=1,
            debounce_ms=200,
            typing_interval_seconds=0.5,
            progress_note_after_seconds=0,  # tests that want the note turn it on
        )
        values.update(overrides)
        return Settings.for_test(tmp_path, **values)

    return make


@pytest.fixture
async def start_bot(make_settings):
    """Start an in-process assistant serving the fake Telegram; stopped at teardown."""
    from bicameral.channels.telegram import TelegramChannel

    apps: list[App] = []

    async def start(*, extra_tools=(), clock=None, **overrides) -> App:
        settings = make_settings(**overrides)
        timed = {} if clock is None else {"clock": clock}
        app = App(settings, [TelegramChannel(telegram_config(settings))], extra_tools=extra_tools, **timed)
        await app.start()
        apps.append(app)
        return app

    yield start
    for app in apps:
        await app.stop()


@pytest.fixture(autouse=True)
async def _warm_readers_closed(monkeypatch):
    """Readers a test's extractors kept warm are stopped before its event loop closes (the app does so at stop)."""
    from bicameral.web.extract import Extractor

    made: list[Extractor] = []
    setup = Extractor.__init__

    def recorded(self: Extractor, *args, **kwargs) -> None:
        setup(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Extractor, "__init__", recorded)
    yield
    for extractor in made:
        await extractor.aclose()


@pytest.fixture(scope="session")
def postgres():
    """One real PostgreSQL server for the session, started by the first test that asks for it."""
    from tests.support.postgres import PostgresServer

    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres):
    """A new, empty database on the session's PostgreSQL; dropped after the test."""
    name = postgres.fresh_name()
    url = postgres.create_database(name)
    yield url
    postgres.drop_database(name)
