"""Server-sent event framing, as both completion APIs use it."""

from __future__ import annotations

from collections.abc import AsyncIterator

from bicameral.models.sse import ServerEvent, server_events


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def _events(*lines: str) -> list[ServerEvent]:
    return [event async for event in server_events(_lines(*lines))]


async def test_named_and_unnamed_events() -> None:
    events = await _events("event: message_start", 'data: {"a": 1}', "", 'data: {"b": 2}', "")
    assert events == [ServerEvent("message_start", '{"a": 1}'), ServerEvent("message", '{"b": 2}')]


async def test_data_lines_join_and_comments_ids_and_empty_events_are_skipped() -> None:
    events = await _events(": keep-alive", "", "id: 7", "data: one", "data:two", "retry: 100", "", "", "event: lonely", "")
    assert events == [ServerEvent("message", "one\ntwo")]


async def test_an_event_cut_off_before_its_blank_line_is_dropped() -> None:
    assert await _events("data: complete", "", "data: {\"cut") == [ServerEvent("message", "complete")]


async def test_only_one_space_after_the_colon_is_framing() -> None:
    assert await _events("data:  two spaces", "") == [ServerEvent("message", " two spaces")]
