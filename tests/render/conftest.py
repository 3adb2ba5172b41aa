"""Render tests need the real Chromium and Playwright: without them they are skipped with the reason."""

from __future__ import annotations

import pytest

from bicameral.browser.chromium import DEFAULT_CHROMIUM, Chromium


@pytest.fixture
async def chromium():
    browser = Chromium(DEFAULT_CHROMIUM)
    if why := browser.why_off():
        pytest.skip(why)
    yield browser
    await browser.aclose()
