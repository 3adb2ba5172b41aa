"""The recall benchmark runs end to end on a small store and reports finite numbers."""

from __future__ import annotations

import math

from bench.recall import QUESTIONS, run_recall


async def test_recall_reports_every_figure_for_each_size():
    result = await run_recall((300, 1_000))
    assert [s.facts for s in result.scales] == [300, 1_000]
    assert all(len(s.seconds) == QUESTIONS for s in result.scales)
    assert result.scales[0].at5 >= QUESTIONS * 0.9  # with only the planted facts, the answer is nearly always there
    figures = result.figures()
    assert len(figures) == 6 and all(math.isfinite(f.value) for f in figures)
