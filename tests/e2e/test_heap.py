"""Once started, the assistant keeps its start-up heap out of collections and collects young objects less often."""

from __future__ import annotations

import gc

from bicameral.app.wiring import YOUNG_COLLECTION_THRESHOLD


async def test_a_started_app_freezes_its_start_up_heap_and_collects_young_objects_less_often(start_bot):
    older = gc.get_threshold()[1:]
    gc.unfreeze()
    gc.set_threshold(700, *older)
    await start_bot()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *older)
