"""The model_usage table: one row per model call (tokens, outcome, chat, role), added up for /usage and /cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bicameral.store.sql import SqlDatabase

GroupBy = Literal["model", "role", "chat"]
_COLUMNS: tuple[GroupBy, ...] = ("model", "role", "chat")


@dataclass(frozen=True)
class UsageTotal:
    """The calls of one group (the grouped columns set, the others None) since a time."""

    model: str | None
    role: str | None
    chat: str | None
    calls: int
    failed: int  # ended in an error (not cancelled)
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None  # what the provider reported for these calls, if it reports (the Claude Code CLI)


class UsageStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def record(
        self,
        *,
        at: float,
        model: str,
        role: str,
        chat: str | None,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int,
        cache_write_tokens: int,
        outcome: str,
        cost_usd: float | None = None,
        people: str | None = None,
    ) -> None:
        """One finished call (a single INSERT, committed on its own); `people`: whose words caused it, person keys
        separated by spaces."""
        self._db.execute(
            """INSERT INTO model_usage (at, model, role, chat, input_tokens, output_tokens, cache_read_tokens,
                   cache_write_tokens, outcome, cost_usd, people) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (at, model, role, chat, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, outcome, cost_usd,
             people),
        )

    def totals(self, since: float, group_by: Sequence[GroupBy] = ("model",), until: float | None = None) -> list[UsageTotal]:
        """The calls made from `since` (and before `until`), added up per distinct value of the `group_by` columns,
        most tokens first."""
        columns = [c for c in _COLUMNS if c in group_by]
        if len(columns) != len(set(group_by)):
            raise ValueError(f"group_by takes {', '.join(_COLUMNS)}, not {list(group_by)}")
        keys = ", ".join(columns)
        selected = ", ".join(c if c in columns else f"NULL AS {c}" for c in _COLUMNS)
        where = "at >= ?" + (" AND at < ?" if until is not None else "")
        params: tuple[float, ...] = (since,) if until is None else (since, until)
        rows = self._db.query(
            f"""SELECT {selected}, COUNT(*) AS calls,
                       SUM(CASE WHEN outcome IN ('ok', 'cancelled') THEN 0 ELSE 1 END) AS failed,
                       SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
                       SUM(cache_read_tokens) AS cache_read_tokens, SUM(cache_write_tokens) AS cache_write_tokens,
                       SUM(cost_usd) AS cost_usd
                FROM model_usage WHERE {where}
                {f"GROUP BY {keys}" if keys else ""}
                ORDER BY SUM(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) DESC""",
            params,
        )
        return [
            UsageTotal(
                model=row["model"],
                role=row["role"],
                chat=row["chat"],
                calls=int(row["calls"]),
                failed=int(row["failed"] or 0),
                input_tokens=int(row["input_tokens"] or 0),
                output_tokens=int(row["output_tokens"] or 0),
                cache_read_tokens=int(row["cache_read_tokens"] or 0),
                cache_write_tokens=int(row["cache_write_tokens"] or 0),
                cost_usd=row["cost_usd"],
            )
            for row in rows
            if row["calls"]
        ]
