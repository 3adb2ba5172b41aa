"""`bicameral migrate-db --to URL`: a SQLite install filled by the real app moved into a real PostgreSQL, where the app
goes on with its history; a second run, a running assistant, a wrong password and a bad row are refused."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from bicameral.app.migrate_db import migrate_db
from bicameral.store import open_database
from bicameral.store.db import Database, known_version
from bicameral.store.sql import SchemaTooNew, SqlDatabase
from bicameral.store.transfer import INDEX_TABLES, TransferRefused, app_tables
from tests.conftest import OWNER
from tests.e2e.test_process import bot_env, run_cli
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.slow


def rows_of(db: SqlDatabase, table: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in db.query(f'SELECT * FROM "{table}"')), key=repr)


async def filled_sqlite_install(telegram, models, start_bot) -> Any:
    """A SQLite data dir the real app wrote: messages, outbox, a schedule, tool calls, usage, kv; the app stopped."""
    models.script(
        Reply(text="Noted: a blue bike."),
        Reply(tool_calls=[ToolCall("schedule_create", {"text": "oil the chain", "at": "2099-01-05 17:00"})]),
        Reply(text="I will remind you."),
    )
    app = await start_bot(database_url=None)
    telegram.user_sends(OWNER, "my bike is blue")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(OWNER, "remind me to oil the chain in 2099")
    await telegram.await_sent(OWNER, 2)
    app.stores.kv.set("migrate-test", "kept 100% as is")
    app.stores.memory.remember("global", "The owner's bike is a blue gravel bike")
    assert app.stores.db.query_one("SELECT COUNT(*) FROM memory_files")[0] > 0
    await app.stop()
    return app.settings


async def test_a_sqlite_install_moves_to_postgresql_where_the_app_goes_on(
    telegram, models, start_bot, postgres_url, tmp_path
):
    settings = await filled_sqlite_install(telegram, models, start_bot)
    source = Database(settings.db_path)
    tables = app_tables(source)
    for table in ("messages", "outbox", "schedules", "kv", "model_usage", "tool_calls"):
        assert source.query_one(f"SELECT COUNT(*) FROM {table}")[0] > 0, table
    assert not INDEX_TABLES & set(tables) and not any(t.startswith(("sqlite_", "memory_fts")) for t in tables)
    before = {table: rows_of(source, table) for table in tables}
    last_message_id = max(r[0] for r in source.query("SELECT id FROM messages"))
    source.close()

    done = await asyncio.to_thread(run_cli, tmp_path, bot_env(tmp_path, telegram, models), "migrate-db", "--to", postgres_url)

    assert done.returncode == 0, done.stderr
    password = urlsplit(postgres_url).password
    assert password and password not in done.stdout + done.stderr
    assert f"copied {len(tables)} tables (" in done.stdout and "BICAMERAL_DATABASE_URL=postgresql://" in done.stdout
    target = open_database(postgres_url)
    try:
        assert {table: rows_of(target, table) for table in tables} == before
    finally:
        target.close()

    models.script(Reply(text="Your bike is blue."))
    asked = len(models.requests)
    app = await start_bot(database_url=postgres_url)
    assert app.stores.db.engine == "postgresql"
    assert app.stores.kv.get("migrate-test") == "kept 100% as is"
    assert [s.body for s in app.stores.schedules.live()] == ["oil the chain"]
    # The memory index was not copied: it is rebuilt from the memory files at its first use.
    assert [f.text for f in app.stores.memory.search("gravel bike", ["global"])] == ["The owner's bike is a blue gravel bike"]
    telegram.user_sends(OWNER, "what colour is my bike?")
    sent = await telegram.await_sent(OWNER, 3)
    assert sent[-1]["text"] == "Your bike is blue."
    prompt = json.dumps(models.requests[asked].messages)
    assert "my bike is blue" in prompt and "Noted: a blue bike." in prompt
    new_ids = [r[0] for r in app.stores.db.query("SELECT id FROM messages WHERE id > ?", (last_message_id,))]
    assert new_ids  # the new question and answer: fresh ids after the copied ones, no collision
    await app.stop()


async def test_a_second_migration_into_the_same_database_is_refused(telegram, models, start_bot, postgres_url, tmp_path):
    settings = await filled_sqlite_install(telegram, models, start_bot)
    env = bot_env(tmp_path, telegram, models)
    first = await asyncio.to_thread(run_cli, tmp_path, env, "migrate-db", "--to", postgres_url)
    assert first.returncode == 0, first.stderr
    target = open_database(postgres_url)
    copied = rows_of(target, "messages")

    again = await asyncio.to_thread(run_cli, tmp_path, env, "migrate-db", "--to", postgres_url)

    assert again.returncode == 2
    assert "already holds bicameral data" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert rows_of(target, "messages") == copied  # nothing added twice
    target.close()
    assert settings.db_path.exists()  # the source is never touched


async def test_refused_while_the_assistant_runs_on_the_data_dir(telegram, models, start_bot, postgres_url, tmp_path):
    models.script(Reply(text="hello"))
    await start_bot(database_url=None)
    telegram.user_sends(OWNER, "hi")
    await telegram.await_sent(OWNER, 1)

    done = await asyncio.to_thread(run_cli, tmp_path, bot_env(tmp_path, telegram, models), "migrate-db", "--to", postgres_url)

    assert done.returncode == 2
    assert "is running on" in done.stderr and "stop it first, then migrate-db" in done.stderr
    target = open_database(postgres_url)  # never reached: not even migrated
    try:
        assert target.query_one("SELECT COUNT(*) FROM messages")[0] == 0
    finally:
        target.close()


async def test_a_wrong_password_exits_2_in_one_line_without_it(telegram, models, start_bot, postgres_url, tmp_path):
    await filled_sqlite_install(telegram, models, start_bot)
    parts = urlsplit(postgres_url)
    wrong = "Wr0ng-Secret-Pw"
    netloc = f"{parts.username}:{wrong}@{parts.hostname}:{parts.port}"
    bad_url = urlunsplit(parts._replace(netloc=netloc))

    done = await asyncio.to_thread(run_cli, tmp_path, bot_env(tmp_path, telegram, models), "migrate-db", "--to", bad_url)

    assert done.returncode == 2
    assert wrong not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "could not connect" in done.stderr


def test_a_row_postgresql_refuses_leaves_the_target_empty(make_settings, postgres_url):
    settings = make_settings(database_url=None)
    source = Database(settings.db_path)
    source.execute("INSERT INTO kv (key, value) VALUES ('first', 'fine')")
    source.execute("INSERT INTO messages (chat, direction, channel, text, created_at) VALUES ('c', 'in', 't', 'hello', 1.0)")
    source.execute("INSERT INTO kv (key, value) VALUES ('bad', ?)", ("a NUL \x00 byte",))  # SQLite keeps it, PostgreSQL not
    source.close()

    with pytest.raises(TransferRefused, match="copying table kv failed"):
        migrate_db(settings.data_dir, settings.db_path, postgres_url)

    target = open_database(postgres_url)
    try:
        for table in ("kv", "messages"):
            assert target.query_one(f"SELECT COUNT(*) FROM {table}")[0] == 0
    finally:
        target.close()


def test_a_source_newer_or_missing_is_refused(make_settings, postgres_url, tmp_path: Path):
    settings = make_settings(database_url=None)
    with pytest.raises(TransferRefused, match="no SQLite database"):
        migrate_db(settings.data_dir, settings.db_path, postgres_url)
    Database(settings.db_path).close()
    conn = sqlite3.connect(settings.db_path)
    conn.execute(f"PRAGMA user_version={known_version() + 1}")
    conn.close()
    with pytest.raises(SchemaTooNew):
        migrate_db(settings.data_dir, settings.db_path, postgres_url)
