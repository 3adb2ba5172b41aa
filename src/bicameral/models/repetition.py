"""Cut a generation that starts repeating itself, holding back only the few words that could be the repeat."""

from __future__ import annotations

import re

# A run of this many words seen before counts as a loop; shorter runs repeat in ordinary prose.
NGRAM_WORDS = 6
_SENTENCE_END = re.compile(r"[.!?…]\s|\n")
_WORD = re.compile(r"\S+")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split())


class RepetitionGuard:
    """Feed it streamed text; it returns what is safe to show and says when the text began to loop.

    A loop is a sentence said before, or a run of NGRAM_WORDS words said before. The words that
    might belong to one (the current sentence, at most NGRAM_WORDS - 1 words of it) are held back,
    so a repeat is dropped whole instead of being shown and then cut.
    """

    def __init__(self) -> None:
        self.text = ""  # everything kept so far (shown + held)
        self._shown = 0  # length of the prefix of `text` already released
        self._sentence_start = 0
        self._sentences: set[str] = set()
        self.looped = False

    def feed(self, piece: str) -> str:
        """Take the next piece; returns the text that may be shown now ("" once it looped)."""
        if self.looped:
            return ""
        self.text += piece
        while (end := _SENTENCE_END.search(self.text, self._sentence_start)) is not None:
            sentence = self.text[self._sentence_start : end.end()]
            key = _norm(sentence)
            if key and key in self._sentences:
                return self._cut(self._sentence_start)
            if key:
                self._sentences.add(key)
            self._sentence_start = end.end()
        words = list(_WORD.finditer(self.text))
        if len(words) > NGRAM_WORDS:
            grams = [_norm(" ".join(w.group() for w in words[i : i + NGRAM_WORDS])) for i in range(len(words) - NGRAM_WORDS)]
            last = _norm(" ".join(w.group() for w in words[-NGRAM_WORDS:]))
            if last and last in grams:
                return self._cut(words[-NGRAM_WORDS].start())
        # Release all but the last NGRAM_WORDS - 1 words of the unfinished sentence.
        hold_from = self._sentence_start
        if len(words) >= NGRAM_WORDS:
            hold_from = max(hold_from, words[-(NGRAM_WORDS - 1)].start())
        return self._release(hold_from)

    def finish(self) -> str:
        """The generation ended: whatever is still held back (nothing after a loop)."""
        return "" if self.looped else self._release(len(self.text))

    def _cut(self, at: int) -> str:
        self.looped = True
        self.text = self.text[: max(at, self._shown)]
        return self._release(len(self.text))

    def _release(self, upto: int) -> str:
        if upto <= self._shown:
            return ""
        out, self._shown = self.text[self._shown : upto], upto
        return out
