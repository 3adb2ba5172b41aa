"""The one normaliser of untrusted text: what hides, reorders or breaks text is removed, and said so.

The gate runs every inbound field through it, the tool registry every tool argument (`normalize_data`),
the terminal everything it prints, the memory files every entry they read or write. Each caller chooses
only what its text is: words people typed are also NFKC composed and have their line breaks unified;
data that must arrive as written (a file's contents, the text edit_file must find, SQL, a command
line) keeps its compatibility characters and its `\\r`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

ZERO_WIDTH_STRIPPED = "zero_width_stripped"
BIDI_STRIPPED = "bidi_stripped"
NFKC_CHANGED = "nfkc_changed"


@dataclass(frozen=True)
class Normalized:
    """Normalised text plus the flags naming what had to change."""

    text: str
    flags: tuple[str, ...]


def normalize(text: str, *, compose: bool = True, keep_carriage_returns: bool = False) -> Normalized:
    """Repair lone surrogates, strip invisible and bidi-control characters and control codes (all but
    `\\n` and `\\t`), then apply NFKC.

    `compose=False` skips NFKC (x² stays x², ﬁ stays ﬁ); `keep_carriage_returns=True` keeps `\\r` as
    it is instead of reading `\\r\\n` and a lone `\\r` as `\\n`.
    """
    zero_width = bidi = nfkc = False
    # A lone half of a surrogate pair (JSON can escape one) cannot be encoded as UTF-8, so no store, log
    # or socket can take it: it becomes U+FFFD, visibly, rather than failing wherever it lands next.
    text = _LONE_SURROGATE_RE.sub("\ufffd", text)
    controls = _CONTROL_KEEPING_CR_RE if keep_carriage_returns else _CONTROL_RE
    # Some compatibility characters NFKC-map onto invisible ones (U+FFA0 -> U+1160), and
    # stripping can leave newly composable sequences, so settle in two rounds at most.
    for _ in range(2):
        text, removed = _ZERO_WIDTH_RE.subn("", text)
        zero_width |= bool(removed)
        text, removed = _BIDI_RE.subn("", text)
        bidi |= bool(removed)
        if not keep_carriage_returns:
            text = _LINE_BREAK_RE.sub("\n", text)
        text = controls.sub("", text)
        if not compose:
            break
        composed = unicodedata.normalize("NFKC", text)
        if composed == text:
            break
        nfkc, text = True, composed
    flags = (ZERO_WIDTH_STRIPPED, BIDI_STRIPPED, NFKC_CHANGED)
    return Normalized(text, tuple(f for f, hit in zip(flags, (zero_width, bidi, nfkc), strict=True) if hit))


class NestedTooDeep(ValueError):
    """Data nested deeper than the caller allows: refused rather than walked."""


def normalize_data(value: Any, *, max_depth: int) -> Any:
    """A copy of JSON-like data (a tool's arguments) with every string, keys too, normalised as data.

    Control codes but tab and line breaks go, invisible and bidi characters go, a lone surrogate becomes
    U+FFFD; those were what hid or broke text. NFKC does not apply and CR stays: an argument is often
    data that must arrive as written (a file's contents and the text edit_file must find in it, a regex,
    SQL, a command line, a path), which NFKC would silently rewrite (x² to x2, ﬁ to fi, full-width CJK
    punctuation to ASCII). Lists and objects deeper than `max_depth` raise NestedTooDeep.
    """
    if isinstance(value, str):
        return normalize(value, compose=False, keep_carriage_returns=True).text
    if isinstance(value, dict | list) and max_depth <= 0:
        raise NestedTooDeep("nested deeper than allowed")
    deeper = max_depth - 1
    if isinstance(value, dict):
        return {normalize_data(k, max_depth=deeper): normalize_data(v, max_depth=deeper) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize_data(item, max_depth=deeper) for item in value]
    return value


_LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")
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
_CONTROL_KEEPING_CR_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
