"""The offline triage's rules on phrasings of their own: none of these is in bench/data/offline_intents.jsonl,
the set the rules were tuned on (the last test holds them apart)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bicameral.offline.intents import Fetch, Recall, Remember, Remind, triage

REMEMBERED = [
    ("remember that the recycling goes out on Mondays", "the recycling goes out on Mondays"),
    ("Remember: Mia's dentist is on Baker Street", "Mia's dentist is on Baker Street"),
    ("please note that my car is a blue Golf.", "my car is a blue Golf"),
    ("note down: printer toner is in the left drawer", "printer toner is in the left drawer"),
    ("keep in mind that my partner can't eat gluten", "my partner can't eat gluten"),
    ("remember my partner's name is Alex", "my partner's name is Alex"),
    ("dont forget that I'm vegan", "I'm vegan"),
    ("could you remember that the wifi at mum's is BTHub-77?", "the wifi at mum's is BTHub-77"),
    ("ok, make a note: seat 14C on the Friday train", "seat 14C on the Friday train"),
    ("@the_bot remember that the standup moved to 10", "the standup moved to 10"),
]
REMINDED = [
    ("remind me in 5 minutes to turn off the stove", "turn off the stove", "in 5 minutes"),
    ("remind me at 8:30 to check the email", "check the email", "at 8:30"),
    ("remind me on Wednesday to water the garden", "water the garden", "on Wednesday"),
    ("remind me to take out the trash tonight", "take out the trash", "tonight"),
    ("Remind me next Friday at 3 to pay the painter", "pay the painter", "next Friday at 3"),
    ("remind me about the conference on the 15th", "the conference", "on the 15th"),
    ("remind me to book a table for Friday", "book a table for Friday", None),  # "for Friday" is the table's
    ("remind me at 2 tomorrow to ring the school", "ring the school", "at 2 tomorrow"),
    ("remind me tomorrow to call the vet at 4pm", "call the vet", "tomorrow at 4pm"),
    ("remind me to buy milk", "buy milk", None),
]
FETCHED = [
    ("summarise https://example.org/news/today", "https://example.org/news/today"),
    ("what does https://www.python.org/downloads say?", "https://www.python.org/downloads"),
    ("tell me what's on example.com", "example.com"),
    ("could you summarize wikipedia.org/wiki/Tea", "wikipedia.org/wiki/Tea"),
    ("TL;DR of https://example.com/a-long-post, please", "https://example.com/a-long-post"),
    ("read https://example.net/terms.", "https://example.net/terms"),
]
RECALLED = [
    ("do you remember my partner's name?", "my partner's name", True),
    ("what did I tell you about gluten?", "gluten", True),
    ("did I mention anything about the painter?", "the painter", True),
    ("what do you remember?", "", True),
    ("remind me what I said about the train", "the train", True),
    ("what's my partner's name?", "my partner's name", False),
    ("who is my landlord", "my landlord", False),
    ("where did I put the spare key?", "the spare key", False),
    ("what is my wifi password, do you remember?", "my wifi password", False),
]
NOTHING = [
    "remember that one time you told me a joke?",
    "remember when we met?",
    "I really remember that movie",
    "note that down please",
    "can you remember my partner's name?",  # a question, not a fact to keep
    "remember to smile",
    "Remember, it's only a game",
    "remind me what the capital of Peru is",
    "remind me how long to boil an egg",
    "remind me of the rules of chess",
    "remind me later",
    "that reminded me of my grandmother",
    "check out this video https://youtube.com/watch?v=1",
    "I found example.com really useful",
    "what do you think about github.com?",
    "summarise main.rs for me",
    "what's the capital of France?",
    "what's the meaning of life?",
    "what are my reminders?",
    "what do you know about quantum physics?",
    "do you remember our chat yesterday?",
    "I remember you!",
    "remind me, what's your name?",
    "he said: remember that the door sticks",
    "good morning! note: today is my birthday\nand I'm turning 40",  # two lines are the model's
]


@pytest.mark.parametrize(("text", "fact"), REMEMBERED)
def test_a_fact_to_keep_is_taken_in_the_persons_words(text: str, fact: str) -> None:
    assert triage(text) == Remember(fact)


@pytest.mark.parametrize(("text", "what", "when"), REMINDED)
def test_a_reminder_splits_what_from_when(text: str, what: str, when: str | None) -> None:
    assert triage(text) == Remind(what, when)


def test_a_repeating_reminder_is_recognised_to_be_declined() -> None:
    assert triage("remind me every morning at 7 to meditate") == Remind("meditate", None, repeating=True)


@pytest.mark.parametrize(("text", "url"), FETCHED)
def test_a_page_to_read_is_found_with_its_address(text: str, url: str) -> None:
    assert triage(text) == Fetch(url)


@pytest.mark.parametrize(("text", "query", "sure"), RECALLED)
def test_a_question_about_notes_names_what_to_look_up(text: str, query: str, sure: bool) -> None:
    assert triage(text) == Recall(query, sure)


@pytest.mark.parametrize("text", NOTHING)
def test_what_only_sounds_like_a_request_triggers_nothing(text: str) -> None:
    assert triage(text) is None


def test_a_group_addresses_the_bot_by_name() -> None:
    assert triage("Ada, remember that the tent pegs are in the van", bot_name="Ada") == Remember(
        "the tent pegs are in the van"
    )
    assert triage("Ada remember me?", bot_name="Ada") is None


def test_these_phrasings_are_not_the_benchmarks() -> None:
    labelled = Path(__file__).parents[2] / "bench" / "data" / "offline_intents.jsonl"
    bench = {json.loads(line)["text"].casefold() for line in labelled.read_text().splitlines() if line.strip()}
    ours = [t for t, *_ in REMEMBERED + REMINDED + FETCHED + RECALLED] + NOTHING
    assert not [t for t in ours if t.casefold() in bench]
