"""The offline triage's benchmark scores every intent of the labelled set and reports finite numbers."""

from __future__ import annotations

import math

from bench.offline import HELD_OUT, INTENTS, load, run_both, run_offline


def test_every_intent_is_scored_on_the_labelled_set() -> None:
    rows = load()
    result = run_offline()
    assert result.phrasings == len(rows) >= 100
    assert {name: s.labelled for name, s in result.scores.items()} == {
        name: sum(row["intent"] == name for row in rows) for name in INTENTS
    }
    assert sum(row["intent"] == "none" for row in rows) >= 30  # negatives that must not trigger
    figures = result.figures()
    assert len(figures) == 2 * len(INTENTS) + 1
    assert all(math.isfinite(f.value) for f in figures)


def test_the_held_out_set_is_scored_apart() -> None:
    tuned, held_out = run_both()
    assert held_out.phrasings == len(load(HELD_OUT)) and held_out.scenario != tuned.scenario
