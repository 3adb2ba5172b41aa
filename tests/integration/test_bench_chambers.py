"""The chambers scenario runs both modes end to end with tiny counts; figures are numbers, never judged."""

from __future__ import annotations

import math

from bench.chambers import BACK, KINDS, MODES, run_chambers


async def test_chambers_answers_every_exchange_and_keeps_greetings_off_the_back():
    result = await run_chambers(trivial=2, tasks=1)
    for mode in MODES:
        for kind in KINDS:
            exchanges = result.exchanges[(mode, kind)]
            assert len(exchanges) == result.counts[kind]
            assert all(e.answered for e in exchanges), (mode, kind)
    assert all(e.requests(BACK) == 0 for e in result.exchanges[("bicameral", "trivial")])
    figures = result.figures()
    assert figures and all(isinstance(f.value, (int, float)) and math.isfinite(f.value) for f in figures)
