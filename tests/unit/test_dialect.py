"""The SQLite statements the stores write, as PostgreSQL is given them."""

from __future__ import annotations

from bicameral.store.dialect import to_postgres


def test_an_upserts_bare_columns_are_the_rows_own_and_excluded_stays_excluded() -> None:
    sql = to_postgres(
        """INSERT INTO caps (day, extra, unlimited) VALUES (?, ?, ?) ON CONFLICT(day) DO UPDATE
           SET extra = extra + excluded.extra, unlimited = MAX(unlimited, excluded.unlimited)"""
    )
    assert 'SET "extra" = "caps"."extra" + "excluded"."extra"' in sql
    assert 'GREATEST("caps"."unlimited", "excluded"."unlimited")' in sql


def test_a_plain_insert_and_a_do_nothing_are_left_as_they_are() -> None:
    assert to_postgres("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING") == (
        'INSERT INTO "kv" ("key", "value") VALUES (%s, %s) ON CONFLICT DO NOTHING'
    )
