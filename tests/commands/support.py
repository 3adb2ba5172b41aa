"""What the command tests share: a good command and its tests, and whether bubblewrap works here."""

from __future__ import annotations

import asyncio

import pytest

from bicameral.sandbox.runner import Sandbox

SHOUT = '''"""Shouts."""

from bicameral.commands import command


@command(name="shout", description="Shout it", params=[("text", str, "what to shout", True)])
async def shout(text: str) -> str:
    return text.upper() + "!"
'''
SHOUT_TESTS = '''from shout import shout


async def test_shout():
    assert await shout("hi") == "HI!"
'''
# The version a rollback goes back to after the change below.
WHISPER_SHOUT = SHOUT.replace('text.upper() + "!"', 'text.lower() + "..."')
WHISPER_TESTS = SHOUT_TESTS.replace('"HI!"', '"hi..."')

WHY_OFF = asyncio.run(Sandbox().unavailable())
needs_bwrap = pytest.mark.skipif(WHY_OFF is not None, reason=f"no working bubblewrap here: {WHY_OFF}")


def named(source: str, name: str) -> str:
    """The shout command (or its tests) under another name."""
    return source.replace("shout", name)
