"""The offline triage's rules on labelled phrasings: bench/data/offline_intents.jsonl, written before the rules and
tuned on (so its figures are an upper bound), and bench/data/offline_intents_heldout.jsonl, written once the rules
were done and never tuned on (change a rule for one of its lines and it is held out no more).

Each line is a message and what it asks for: `remember` (with the `fact` to keep), `remind` (`what`, and `due`,
the wall-clock time it means seen from Wed 25 Nov 2026 14:30 in Europe/Berlin, null for none, left out where no
one time is right), `fetch` (the `url`), `recall`
(the `query`), or `none`, which must trigger nothing. Per intent: precision (of the messages the rules gave
that intent, how many were labelled so), recall (of the messages labelled so, how many the rules caught), and
how many of those caught also got the right words out (the fact, the text and time, the address, the query).
No app, no model: `triage` and the time resolution alone.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bench.report import Figure
from bicameral.offline.intents import Fetch, Intent, Recall, Remember, Remind, triage
from bicameral.offline.when import resolve
from bicameral.store.memory_index import meaningful_words

DATA = Path(__file__).parent / "data" / "offline_intents.jsonl"
HELD_OUT = Path(__file__).parent / "data" / "offline_intents_heldout.jsonl"
ZONE = "Europe/Berlin"
NOW = datetime(2026, 11, 25, 14, 30, tzinfo=ZoneInfo(ZONE)).timestamp()
INTENTS = ("remember", "remind", "fetch", "recall")
_LABELS: dict[type, str] = {Remember: "remember", Remind: "remind", Fetch: "fetch", Recall: "recall"}


@dataclass
class IntentScore:
    labelled: int = 0
    predicted: int = 0
    caught: int = 0
    slots_right: int = 0

    @property
    def precision(self) -> float:
        return self.caught / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        return self.caught / self.labelled if self.labelled else 1.0


@dataclass
class OfflineResult:
    scenario: str = "offline"
    phrasings: int = 0
    scores: dict[str, IntentScore] = field(default_factory=lambda: {name: IntentScore() for name in INTENTS})
    false_triggers: list[str] = field(default_factory=list)  # labelled none, triggered: the costly mistakes
    wrong: list[str] = field(default_factory=list)  # every miss or confusion, for tuning
    triage_us: float = 0.0  # mean time of one `triage` call

    def figures(self) -> list[Figure]:
        name = self.scenario
        figures = []
        for intent, score in self.scores.items():
            figures.append(Figure(name, f"{intent}: precision", 100 * score.precision, "%",
                                  f"{score.caught} of the {score.predicted} triggered"))
            figures.append(Figure(name, f"{intent}: recall", 100 * score.recall, "%",
                                  f"{score.caught} of {score.labelled} caught; the words right in {score.slots_right}"))
        shown = "; ".join(self.false_triggers[:3]) or "none"
        figures.append(Figure(name, "negatives that triggered", len(self.false_triggers), "",
                              f"of {self.phrasings} phrasings: {shown}"))
        return figures


def load(path: Path = DATA) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _same(a: str, b: str) -> bool:
    return a.strip().rstrip(".").casefold() == b.strip().rstrip(".").casefold()


def slots_right(intent: Intent, row: dict[str, str]) -> bool:
    """Did the rules take the right words out of the message?"""
    if isinstance(intent, Remember):
        return _same(intent.fact, row["fact"])
    if isinstance(intent, Fetch):
        return intent.url == row["url"]
    if isinstance(intent, Recall):
        return set(meaningful_words(intent.query)) == set(meaningful_words(row["query"]))
    if not _same(intent.what, row["what"]):
        return False
    if "due" not in row:
        return True  # "next week": no one time is the right one
    due = resolve(intent.when, NOW, ZONE) if intent.when else None
    expected = row["due"]
    return (due is None) if expected is None else (due is not None and due.at == expected)


def run_offline(path: Path = DATA, scenario: str = "offline") -> OfflineResult:
    rows = load(path)
    result = OfflineResult(scenario, phrasings=len(rows))
    triage("remind me in 5 minutes to stretch")  # the time patterns are compiled with the first reminder
    started = time.perf_counter()
    found = [triage(row["text"]) for row in rows]
    result.triage_us = (time.perf_counter() - started) / max(len(rows), 1) * 1e6
    for row, intent in zip(rows, found, strict=True):
        label = row["intent"]
        got = _LABELS[type(intent)] if intent is not None else "none"
        if label in result.scores:
            result.scores[label].labelled += 1
        if got in result.scores:
            result.scores[got].predicted += 1
        if got == label and intent is not None:
            result.scores[label].caught += 1
            if slots_right(intent, row):
                result.scores[label].slots_right += 1
            else:
                result.wrong.append(f"{row['text']!r}: words {intent}")
        elif got != label:
            result.wrong.append(f"{row['text']!r}: {label} → {got} {intent or ''}")
            if label == "none":
                result.false_triggers.append(row["text"])
    return result


def run_both() -> list[OfflineResult]:
    """The set the rules were tuned on, then the one held out."""
    return [run_offline(DATA), run_offline(HELD_OUT, "offline, held out")]


if __name__ == "__main__":  # `python -m bench.offline`: the mistakes, one a line, for tuning the rules
    tuned, held_out = run_both()
    for line in tuned.wrong:
        print(line)
    print(f"(and {len(held_out.wrong)} on the held-out set, not shown: it is not for tuning)")
    for figure in tuned.figures() + held_out.figures():
        print(f"{figure.scenario:18} {figure.name:26} {figure.shown():>6}  {figure.note}")
    print(f"triage per message: {tuned.triage_us:.0f} µs")
