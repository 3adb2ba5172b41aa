"""RepetitionGuard: a looping generation is cut before the repeat is shown; ordinary text passes whole."""

from __future__ import annotations

import re

from bicameral.models.repetition import RepetitionGuard


def _stream(text: str) -> tuple[list[str], bool]:
    """Feed `text` word by word, as a model streams it; returns the pieces released and whether it looped."""
    guard = RepetitionGuard()
    shown: list[str] = []
    for piece in re.findall(r"\S+\s*", text):
        shown.append(guard.feed(piece))
        if guard.looped:
            break
    shown.append(guard.finish())
    return [s for s in shown if s], guard.looped


def test_a_repeated_sentence_is_cut_before_it_is_shown() -> None:
    shown, looped = _stream("Hi there! I'm ready to help. I'm ready to help. I'm ready to help. I'm ready to help.")
    assert looped and "".join(shown).strip() == "Hi there! I'm ready to help."


def test_a_repeated_run_of_words_inside_a_sentence_is_cut() -> None:
    shown, looped = _stream("The cat sat on the mat and then the cat sat on the mat and then the cat sat on the mat")
    assert looped and "".join(shown).strip() == "The cat sat on the mat and then"


def test_ordinary_text_passes_whole_and_streams_in_pieces() -> None:
    text = "Paris is the capital of France. It is known for the Eiffel Tower, its museums and its cafes. Enjoy!"
    shown, looped = _stream(text)
    assert not looped and "".join(shown) == text
    assert len(shown) > 3  # released as it comes, not all at the end


def test_a_repeat_differing_only_in_case_and_punctuation_still_counts() -> None:
    shown, looped = _stream("Sure, happy to help! Sure happy to help. More text follows here.")
    assert looped and "".join(shown).strip() == "Sure, happy to help!"
