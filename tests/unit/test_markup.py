"""Our envelope escaping matches the standard library's, character for character."""

from __future__ import annotations

from xml.sax.saxutils import escape as std_escape
from xml.sax.saxutils import quoteattr as std_quoteattr

from hypothesis import given
from hypothesis import strategies as st

from bicameral.markup import escape, quoteattr


@given(st.text())
def test_escape_matches_the_standard_library(text: str) -> None:
    assert escape(text) == std_escape(text)


@given(st.text(alphabet=st.sampled_from(list("ab<>&\"'\n\r\t é"))))
def test_quoteattr_matches_the_standard_library(value: str) -> None:
    assert quoteattr(value) == std_quoteattr(value)
