"""Unicode normalisation of inbound text, flagging invisible or deceptive characters."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

ZERO_WIDTH_STRIPPED = "zero_width_stripped"
BIDI_STRIPPED = "bidi_stripped"
NFKC_CHANGED = "nfkc_changed"


@dataclass(frozen=True)
class Normalized:
    """Normalised text plus the flags naming what had to change."""

    text: str
    flags: tuple[str, ...]


def normalize(text: str) -> Normalized:
    """Strip invisible and bidi-control characters and control codes, then apply NFKC."""
    zero_width = bidi = nfkc = False
    # Some compatibility characters NFKC-map onto invisible ones (U+FFA0 -> U+1160), and
    # stripping can leave newly composable sequences, so settle in two rounds at most.
    for _ in range(2):
        text, removed = _ZERO_WIDTH_RE.subn("", text)
        zero_width |= bool(removed)
        text, removed = _BIDI_RE.subn("", text)
        bidi |= bool(removed)
        text = _CONTROL_RE.sub("", _LINE_BREAK_RE.sub("\n", text))
        composed = unicodedata.normalize("NFKC", text)
        if composed == text:
            break
        nfkc, text = True, composed
    flags = (ZERO_WIDTH_STRIPPED, BIDI_STRIPPED, NFKC_CHANGED)
    return Normalized(text, tuple(f for f, hit in zip(flags, (zero_width, bidi, nfkc), strict=True) if hit))


_ZERO_WIDTH_RE = re.compile(
    "["
    "\u00ad"  # soft hyphen
    "\u034f"  # combining grapheme joiner
    "\u115f\u1160\u3164\uffa0"  # Hangul fillers, popular for invisible names
    "\u17b4\u17b5"  # Khmer inherent vowels, rendered invisible
    "\u180e"  # Mongolian vowel separator
    "\u200b-\u200d"  # zero-width space, non-joiner, joiner
    "\u2060-\u2064"  # word joiner and invisible math operators
    "\ufeff"  # zero-width no-break space / BOM
    "\U000e0000-\U000e007f"  # tag characters: used to smuggle invisible ASCII into prompts
    "\U000e0100-\U000e01ef"  # variation selectors 17-256: same smuggling trick
    "]"
)
_BIDI_RE = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# \r\n and lone \r are line breaks, not control noise to delete.
_LINE_BREAK_RE = re.compile("\r\n?")
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
