"""Tests for boundary Unicode normalisation."""

from __future__ import annotations

import dataclasses
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bicameral.text import Normalized, normalize

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u180e\u00ad\U000e0041"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
ALL_FLAGS = ("zero_width_stripped", "bidi_stripped", "nfkc_changed")


def test_plain_text_is_untouched() -> None:
    text = "Hello, world!\n\tIndented line — with an em dash and ünïcödé."
    assert normalize(text) == Normalized(text, ())


def test_result_is_frozen() -> None:
    result = normalize("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "y"  # type: ignore[misc]


@pytest.mark.parametrize("char", list(ZERO_WIDTH))
def test_zero_width_characters_are_stripped(char: str) -> None:
    assert normalize(f"pass{char}word") == Normalized("password", ("zero_width_stripped",))


@pytest.mark.parametrize("char", list(BIDI))
def test_bidi_controls_are_stripped(char: str) -> None:
    assert normalize(f"abc{char}def") == Normalized("abcdef", ("bidi_stripped",))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ｆｕｌｌｗｉｄｔｈ", "fullwidth"),
        ("ﬁle", "file"),
        ("x²", "x2"),
        ("e\u0301", "é"),
        ("Ⅻ", "XII"),
    ],
)
def test_nfkc_changes_are_flagged(text: str, expected: str) -> None:
    assert normalize(text) == Normalized(expected, ("nfkc_changed",))


def test_flags_come_in_fixed_order() -> None:
    result = normalize("\u202eｆ\u200bo")
    assert result == Normalized("fo", ALL_FLAGS)
    assert normalize("\u200e\u200bx").flags == ("zero_width_stripped", "bidi_stripped")


def test_control_characters_are_dropped_without_flags() -> None:
    assert normalize("a\x00b\x07c\x1bd\x7fe\x85f\x9fg") == Normalized("abcdefg", ())
    assert normalize("keep\nnew\tlines") == Normalized("keep\nnew\tlines", ())


def test_carriage_returns_become_newlines() -> None:
    assert normalize("one\r\ntwo\rthree").text == "one\ntwo\nthree"


def test_emoji_survive_apart_from_joiners() -> None:
    assert normalize("👍🏽 ❤️").text == "👍🏽 ❤️"
    assert normalize("👩\u200d💻").text == "👩💻"


def test_stripping_then_composing() -> None:
    # A zero-width char separating a base from its accent hides the composed form.
    assert normalize("e\u200b\u0301") == Normalized("é", ("zero_width_stripped", "nfkc_changed"))


INVISIBLE = set(ZERO_WIDTH + BIDI) | {chr(c) for c in range(32) if chr(c) not in "\n\t"}


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(list(ZERO_WIDTH + BIDI + "\r\x00")))))
def test_properties(text: str) -> None:
    result = normalize(text)
    assert not INVISIBLE & set(result.text)
    assert unicodedata.is_normalized("NFKC", result.text)
    assert list(result.flags) == [flag for flag in ALL_FLAGS if flag in result.flags]
    again = normalize(result.text)
    assert again == Normalized(result.text, ())
    if result.text == text:
        assert result.flags == ()


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    # JSON may escape half a surrogate pair on its own; UTF-8 (so every store and socket) cannot take it.
    assert normalize("caf\ud800e \udfff") == Normalized("caf\ufffde \ufffd", ())
    assert normalize("\ud83d\ude00").text == "\ufffd\ufffd"  # two halves apart are still two lone halves
    assert normalize("😀").text == "😀"
    normalize("x\udc80", compose=False).text.encode("utf-8")  # encodable either way


def test_data_keeps_its_compatibility_characters_and_carriage_returns() -> None:
    """What tool arguments get: the hiding and reordering characters go, the data stays as written."""
    data = "x² ﬁle ｆｕｌｌ\r\n\tcode\r"
    assert normalize(data, compose=False, keep_carriage_returns=True) == Normalized(data, ())
    hostile = "rm\x00 -rf\u202e\u200b /\x1b[2J\x85\r\n"
    assert normalize(hostile, compose=False, keep_carriage_returns=True) == Normalized(
        "rm -rf /[2J\r\n", ("zero_width_stripped", "bidi_stripped")
    )
    assert normalize("a\rb", compose=False).text == "a\nb"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(list(ZERO_WIDTH + BIDI + "\r\x00\ud800\udfff")))))
def test_data_properties(text: str) -> None:
    result = normalize(text, compose=False, keep_carriage_returns=True)
    assert not (INVISIBLE - {"\r"}) & set(result.text)
    result.text.encode("utf-8")
    assert normalize(result.text, compose=False, keep_carriage_returns=True) == Normalized(result.text, ())
