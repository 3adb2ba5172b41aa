"""The memory store's tests once per engine: SQLite's FTS5 and PostgreSQL's own full-text search (a real server)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from bicameral.store import Stores
from bicameral.store.memory_scopes import user_scope
from tests.unit import test_memory_store as on_sqlite
from tests.unit.test_memory_store import *  # noqa: F403  the same tests, with `stores` below

# Not that module's sqlite_only mark: here the index runs on PostgreSQL too.
pytestmark: list[pytest.MarkDecorator] = []

ADA = user_scope("telegram:1001")
BOB = user_scope("telegram:2002")


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request, data: Path):  # this module's stores: one per engine
    location = request.getfixturevalue("postgres_url") if request.param == "postgresql" else data / "bicameral.db"
    opened = Stores.open(location, data_dir=data)
    yield opened
    opened.close()


def test_scope_names_become_safe_file_names_inside_the_root(data: Path, stores: Stores) -> None:
    if stores.db.engine == "postgresql":
        pytest.skip("PostgreSQL's text cannot hold a NUL, which one of these scope names has (the engine's, not the index's)")
    on_sqlite.test_scope_names_become_safe_file_names_inside_the_root(data, stores)


def test_stemmed_words_find_a_fact_and_the_better_match_ranks_first(stores: Stores) -> None:
    stores.memory.remember(ADA, "Ada runs along the canal every morning")
    stores.memory.remember(ADA, "Ada's running shoes are blue; running keeps her sane; she loves running")
    stores.memory.remember(BOB, "Bob runs marathons")
    found = stores.memory.index.search("running", [ADA], limit=5)
    assert found[0].text.startswith("Ada's running shoes")
    assert {f.scope for f in found} == {ADA} and len(found) == 2
    assert all(f.rank < 0 for f in found)  # lower is better on both engines
    assert stores.memory.index.search("of the and", [ADA], limit=5) == []  # only words that say nothing
    assert stores.memory.index.search("canal", [], limit=5) == []


def test_words_with_quotes_and_operators_never_break_the_query(stores: Stores) -> None:
    stores.memory.remember(ADA, "The wifi password hint is 'tea & biscuits'")
    for text in ["tea & biscuits | !(x) <-> 'y'", "\\' OR 1=1 --", "biscuits:*", "ünïcode tëa"]:
        texts = [f.text for f in stores.memory.index.search(text, [ADA], limit=5)]
        assert texts in ([], ["The wifi password hint is 'tea & biscuits'"])
    assert stores.memory.index.search("BISCUIT", [ADA], limit=5)[0].text.startswith("The wifi")


def test_on_postgresql_the_index_is_a_table_with_a_gin_index_made_once(postgres_url: str, tmp_path: Path) -> None:
    first = Stores.open(postgres_url, data_dir=tmp_path)
    second = Stores.open(postgres_url, data_dir=tmp_path)  # a second worker: the table is already there
    try:
        first.memory.remember(ADA, "The boiler is serviced every October")
        assert [f.text for f in second.memory.index.search("boilers", [ADA], limit=3)] == [
            "The boiler is serviced every October"
        ]
        with psycopg.connect(postgres_url) as conn:
            index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_fts_tsv'").fetchone()
            assert index is not None and "gin" in index[0].lower()
        first.memory.forget("boiler", [ADA])
        assert second.memory.index.search("boiler", [ADA], limit=3) == []
    finally:
        first.close()
        second.close()
