"""Shared fixtures: the fake Telegram server, the scripted model server, and a running assistant."""

from __future__ import annotations

import os

# Imported now, on the main thread alone: hypothesis's pytest plugin would otherwise import it while writing the
# summary of a run that used none of it, and pytest's rewriting of it then races the threads a test left running
# on CPython 3.11's AST constructor, whose depth counter is shared ("SystemError: AST constructor recursion depth
# mismatch", python/cpython#106905), ending the run after its tests passed.
import hypothesis  # noqa: F401
import pytest

from bicameral.app import App, telegram_config
from bicameral.config import Settings
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_server import FakeTelegram

OWNER = 1001

# `BICAMERAL_TEST_DATABASE=postgresql` runs the tests that build Settings with `make_settings` on a fresh
# PostgreSQL database each (the stores' second engine); unset, or `sqlite`, keeps SQLite in the data dir.
TEST_DATABASE = os.environ.get("BICAMERAL_TEST_DATABASE", "sqlite").strip().lower() or "sqlite"
if TEST_DATABASE not in ("sqlite", "postgresql"):
    raise pytest.UsageError(f"BICAMERAL_TEST_DATABASE must be sqlite or postgresql, not {TEST_DATABASE!r}")
ENGINES = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sqlite_only(reason): the test needs what only SQLite has yet; skipped on PostgreSQL with the reason",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `sqlite_only` test is skipped when it would run on PostgreSQL (the whole run, or its `database` parameter)."""
    marker = item.get_closest_marker("sqlite_only")
    if marker is None:
        return
    callspec = getattr(item, "callspec", None)
    engine = callspec.params.get("database_location", TEST_DATABASE) if callspec is not None else TEST_DATABASE
    if engine == "postgresql":
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "SQLite only")
        pytest.skip(f"SQLite only: {reason}")


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
def make_settings(request, tmp_path, telegram, models):
    """Settings wired to the fakes; keyword overrides win. On PostgreSQL every call shares the test's one database."""
    database_url = request.getfixturevalue("postgres_url") if TEST_DATABASE == "postgresql" else None

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
        if database_url is not None:
            values["database_url"] = database_url
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


@pytest.fixture(params=ENGINES)
def database_location(request, tmp_path):
    """Where a store test's database is, once per engine: a SQLite file in tmp_path, then a fresh PostgreSQL."""
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_url")
    return tmp_path / "db.sqlite"


@pytest.fixture
def database(database_location):
    """An open database of each engine (the store tests that hold for both ask for this); closed after the test."""
    from bicameral.store import open_database

    db = open_database(database_location)
    yield db
    db.close()
