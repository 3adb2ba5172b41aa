"""Server-sent event framing, as both completion APIs use it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bicameral.models.sse import ServerEvent, server_events, text_lines


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


# Lines of a streamed body

# \u2028, \x0b, \x0c, \x1c-\x1e and \x85 end lines for str.splitlines() (and httpx's aiter_lines), but not in an
# event stream.
SSE = "data: one\n\ndata: two\r\n\r\ndata: three\r\rdata: é€😀\n: \u2028\x0b\x0c\x1c\x1d\x1e\x85 stay\r\nlast".encode()
SSE_LINES = ["data: one", "", "data: two", "", "data: three", "", "data: é€😀", ": \u2028\x0b\x0c\x1c\x1d\x1e\x85 stay", "last"]


async def _chunks(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def _text_lines(*chunks: bytes) -> list[str]:
    return [line async for line in text_lines(_chunks(*chunks))]


async def test_lines_of_a_body_one_byte_per_chunk() -> None:
    assert await _text_lines(*(SSE[i : i + 1] for i in range(len(SSE)))) == SSE_LINES


async def test_lines_of_a_body_split_in_two_at_every_byte() -> None:
    for split in range(len(SSE) + 1):
        assert await _text_lines(SSE[:split], SSE[split:]) == SSE_LINES, f"split at byte {split}"


@pytest.mark.parametrize(
    ("body", "lines"),
    [
        (b"", []),
        (b"\n", [""]),
        (b"a\n", ["a"]),
        (b"a\r\n", ["a"]),
        (b"a\r", ["a"]),
        (b"\r\n\r\n", ["", ""]),
        (b"a\r\r\nb", ["a", "", "b"]),
        (b"a\n\rb", ["a", "", "b"]),
        (b"no ending", ["no ending"]),
        (b"bad \xff byte\n", ["bad \ufffd byte"]),
        (b"cut short \xe2\x82", ["cut short \ufffd"]),
    ],
)
async def test_line_endings_and_undecodable_bytes(body: bytes, lines: list[str]) -> None:
    assert await _text_lines(*(body[i : i + 1] for i in range(len(body)))) == lines
