"""Memory retrieval: do the facts that feed injection hold the answer, at what cost in tokens and time?

300 planted facts over 60 people and groups (5 each), 150 questions whose answer is one of them,
asked from the owner of that fact's reach. The same questions run with the store filled to 10k and
100k facts (filler in the same scopes, sharing vocabulary with the planted ones). Retrieval is
`Memory.relevant`, exactly what goes into a prompt: index refresh, FTS match, importance, budget.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench.report import Figure
from bicameral.store import Stores
from bicameral.store.memory import tokens
from bicameral.store.memory_files import Entry, new_file, path_for_scope, render_entry
from bicameral.store.memory_scopes import GLOBAL, chat_scope, user_scope

SCOPES = 60
PLANTED_PER_SCOPE = 5
QUESTIONS = 150
BUDGET_TOKENS = 400
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

_FIRST = "Ada Ben Cleo Dan Eva Finn Gus Hana Ivo Jan Kim Lea Max Nia Otto Pia Raj Sue Tom Uma".split()
_SURNAME = "Ito Novak Berg Costa Dubois Eklund Fischer Garcia Haas Ivanova Jensen Kowalski".split()
_WORDS = "amber basil cedar delta ember fjord gale harbor iris juniper kestrel lotus maple nectar onyx".split()
# (fact, question): the question shares a topic word or two with its fact, never the answer.
_TEMPLATES = [
    ("I am allergic to {w}", "what am I allergic to?"),
    ("My dentist is Dr. {s} on {w} Street", "who is my dentist?"),
    ("The staging server is called {w}-{n}", "what's the staging server called again?"),
    ("My daughter goes to {w} Primary school", "which school does my daughter go to?"),
    ("My car's licence plate is {W}-{n}", "what's my car's licence plate?"),
    ("The wifi password here is {w}{n}", "what is the wifi password?"),
    ("I parked on level {n} of the airport garage", "where did I park at the airport?"),
    ("My gym membership renews on the {n}th", "when does my gym membership renew?"),
    ("The team standup is at {n}:15 on weekdays", "what time is the standup?"),
    ("My landlord is {f} {s}, call after six", "who is my landlord?"),
]
_FILLER = [
    "{f} recommended a book about {w} gardens",
    "{f} also needs a new dentist near {w} Street",
    "{f}'s car broke down on the {w} bridge",
    "Buy {w} tea before the {n}th",
    "The {w} server was retired last year",
    "{f} went to the airport on level {n} by mistake",
    "The school trip to {w} costs {n} euros",
    "{f} changed gyms in {w} last spring",
    "Watched a film about {w} with {f}",
    "{f}'s password manager locked out on the {n}th",
    "Standup notes live in the {w} folder",
    "{f} is looking for a landlord in {w}",
]


@dataclass
class Scale:
    facts: int
    build_seconds: float
    at1: int = 0
    at5: int = 0
    injected_tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


@dataclass
class RecallResult:
    scales: list[Scale] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        figures = []
        for scale in self.scales:
            label = f"{scale.facts:,} facts"
            asked = len(scale.seconds)
            p99 = statistics.quantiles(scale.seconds, n=100)[98] if asked >= 2 else scale.seconds[0]
            figures += [
                Figure("recall", f"{label}: recall@1 / @5", 100 * scale.at1 / asked, "%",
                       f"@5 {100 * scale.at5 / asked:.0f}%; {asked} questions, each answered by one planted fact"),
                Figure("recall", f"{label}: injected tokens per turn, mean", statistics.mean(scale.injected_tokens), "tokens",
                       f"budget {BUDGET_TOKENS}; about 4 characters a token"),
                Figure("recall", f"{label}: retrieval p50", statistics.median(scale.seconds) * 1000, "ms",
                       f"p99 {p99 * 1000:.2f} ms; index refresh + FTS + importance; building the index took "
                       f"{scale.build_seconds:.1f} s"),
            ]
        return figures


def _scopes() -> list[str]:
    people = [user_scope(f"telegram:{5000 + i}") for i in range(SCOPES * 3 // 4)]
    groups = [chat_scope(f"telegram:-100{900 + i}") for i in range(SCOPES - len(people))]
    return people + groups


def _fill(template: str, rng: random.Random) -> str:
    word = rng.choice(_WORDS)
    return template.format(w=word, W=word.upper(), n=rng.randint(2, 99), f=rng.choice(_FIRST), s=rng.choice(_SURNAME))


def _dataset(rng: random.Random) -> tuple[dict[str, list[Entry]], list[tuple[str, str, str]]]:
    """Planted facts per scope, and (scope, question, fact id) for the questions."""
    planted: dict[str, list[Entry]] = {}
    questions: list[tuple[str, str, str]] = []
    for index, scope in enumerate(_scopes()):
        entries = []
        for number, (fact, question) in enumerate(rng.sample(_TEMPLATES, PLANTED_PER_SCOPE)):
            entry = Entry(id=f"p{index:02d}{number}", text=_fill(fact, rng), importance=round(rng.uniform(0.3, 0.9), 2))
            entries.append(entry)
            questions.append((scope, question, entry.id))
        planted[scope] = entries
    return planted, rng.sample(questions, QUESTIONS)


def _write(root: Path, planted: dict[str, list[Entry]], total: int, rng: random.Random) -> None:
    filler_per_scope = max(0, total - sum(len(e) for e in planted.values())) // len(planted)
    for scope, entries in planted.items():
        filler = [
            Entry(id=f"f{abs(hash((scope, i))) % 10**10:010d}", text=_fill(rng.choice(_FILLER), rng),
                  importance=round(rng.uniform(0.1, 0.9), 2))
            for i in range(filler_per_scope)
        ]
        mixed = filler + entries
        rng.shuffle(mixed)
        path = path_for_scope(root, scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new_file(scope, _EPOCH) + "\n" + "\n".join(render_entry(e) for e in mixed) + "\n")


def _measure(total: int, seed: int = 7) -> Scale:
    rng = random.Random(seed)
    planted, questions = _dataset(rng)
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        data = Path(tmp) / "data"
        _write(data / "memory", planted, total, rng)
        stores = Stores.open(data / "bicameral.db")
        try:
            started = time.perf_counter()
            stores.memory.sync()
            scale = Scale(facts=max(total, sum(len(e) for e in planted.values())), build_seconds=time.perf_counter() - started)
            for scope, question, answer in questions:
                began = time.perf_counter()
                chosen = stores.memory.relevant(question, (GLOBAL, scope), BUDGET_TOKENS)
                scale.seconds.append(time.perf_counter() - began)
                ids = [f.id for f in chosen]
                scale.at1 += ids[:1] == [answer]
                scale.at5 += answer in ids[:5]
                scale.injected_tokens.append(sum(tokens(f.text) for f in chosen))
            return scale
        finally:
            stores.close()


async def run_recall(sizes: tuple[int, ...] = (300, 10_000, 100_000)) -> RecallResult:
    return RecallResult([_measure(size) for size in sizes])
