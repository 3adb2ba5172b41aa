"""Prices (built in, the owner's file over them, never a guess), /usage and /cost's answers, UTC days and weeks, and
/model's switches and refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bicameral.console.model_choice import ModelSetup, show, switch
from bicameral.console.prices import BUILT_IN, FREE, Price, Prices
from bicameral.console.usage import cost_text, day_start, money, period_name, usage_text, week_start
from bicameral.models.chosen import ModelChoices
from bicameral.store.usage import UsageTotal

# Wednesday 25 November 2026, 14:30 UTC.
NOW = datetime(2026, 11, 25, 14, 30, tzinfo=UTC).timestamp()


def total(model: str | None, chat: str | None, tokens_in: int, tokens_out: int, *, role: str = "back", calls: int = 1,
          failed: int = 0, cache_read: int = 0, cache_write: int = 0, cost: float | None = None) -> UsageTotal:
    return UsageTotal(model, role, chat, calls, failed, tokens_in, tokens_out, cache_read, cache_write, cost)


# --- prices ---


def test_the_built_in_prices_and_dated_names(tmp_path: Path) -> None:
    prices = Prices.load(tmp_path / "absent.json")
    assert prices.problem is None
    assert prices.price("anthropic:claude-sonnet-4-5") == BUILT_IN["anthropic:claude-sonnet-4-5"]
    assert prices.price("anthropic:claude-sonnet-4-5-20250929") == BUILT_IN["anthropic:claude-sonnet-4-5"]
    assert prices.price("openai:gpt-4o-2024-08-06") == BUILT_IN["openai:gpt-4o"]
    assert prices.price("openai:gpt-4o-mini") == BUILT_IN["openai:gpt-4o-mini"]


def test_an_unknown_model_has_no_price_and_a_local_one_is_free(tmp_path: Path) -> None:
    prices = Prices.load(tmp_path / "absent.json")
    for unknown in ("openai:back", "openai:gpt-5-pro", "openai:gpt-4o-mini-x", "anthropic:claude-next", "echo"):
        assert prices.price(unknown) is None, unknown
    assert prices.price("local:SmolLM2-135M-Instruct.Q4_1.gguf") == FREE
    assert prices.price("local") == FREE


def test_a_cost_charges_cache_reads_and_writes_as_input_unless_priced() -> None:
    assert Price(2.0, 10.0).cost(1_000_000, 100_000, 500_000, 250_000) == pytest.approx(2 + 1 + 1 + 0.5)
    assert Price(3.0, 15.0, 0.3, 3.75).cost(1_000_000, 0, 1_000_000, 1_000_000) == pytest.approx(3 + 0.3 + 3.75)


def test_the_owners_file_overrides_and_adds(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"openai:back": {"input": 1, "output": 2}, "openai:gpt-4o": {"input": 9, "output": 9}}')
    prices = Prices.load(path)
    assert prices.problem is None
    assert prices.price("openai:back") == Price(1.0, 2.0)
    assert prices.price("openai:gpt-4o") == Price(9.0, 9.0)
    assert prices.price("anthropic:claude-haiku-4-5") == BUILT_IN["anthropic:claude-haiku-4-5"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "it is not JSON (line 1"),
        ("[1, 2]", "one JSON object of models"),
        ('{"gpt-4o": {"input": 1, "output": 2}}', "provider:model"),
        ('{"openai:x": {"input": 1}}', "needs at least an input and an output price"),
        ('{"openai:x": {"input": 1, "output": 2, "per_call": 3}}', "has per_call"),
        ('{"openai:x": {"input": -1, "output": 2}}', "input price is -1"),
        ('{"openai:x": {"input": true, "output": 2}}', "input price is True"),
        ('{"openai:x": {"input": NaN, "output": 2}}', "input price is nan"),
    ],
)
def test_a_malformed_file_is_reported_and_the_built_in_prices_are_used(tmp_path: Path, text: str, why: str, caplog) -> None:
    path = tmp_path / "prices.json"
    path.write_text(text)
    prices = Prices.load(path)
    assert prices.problem is not None and why in prices.problem and str(path) in prices.problem
    assert prices.table == BUILT_IN and prices.price("openai:x") is None
    assert "was not read" in caplog.text


# --- periods ---


def test_days_and_weeks_start_at_midnight_utc_on_monday() -> None:
    assert datetime.fromtimestamp(day_start(NOW), UTC) == datetime(2026, 11, 25, tzinfo=UTC)
    assert datetime.fromtimestamp(week_start(NOW), UTC) == datetime(2026, 11, 23, tzinfo=UTC)
    monday = datetime(2026, 11, 23, 0, 0, 1, tzinfo=UTC).timestamp()
    assert week_start(monday) == day_start(monday)
    assert period_name(week_start(NOW), week=True) == "this week (since Monday 23 Nov, 00:00 UTC)"


# --- the answers ---


def test_usage_lists_tokens_per_model_and_per_chat_for_both_periods() -> None:
    today = [
        total("openai:a", "telegram:1", 1000, 200, cache_read=50),
        total("openai:a", "telegram:2", 10, 2, role="front", failed=1),
    ]
    week = [*today, total("openai:b", "telegram:1", 5, 5, calls=3)]
    text = usage_text(today, week, NOW)
    first, second = text.split("This week (since Monday 23 Nov, 00:00 UTC):")
    assert "Today (since 00:00 UTC):" in first
    assert "• openai:a (back, front): 1,010 in, 202 out, cache 50 read / 0 written, 2 calls, 1 failed" in first
    assert "• telegram:1: 1,000 in, 200 out, cache 50 read / 0 written, 1 call" in first
    assert "openai:b" not in first and "• openai:b (back): 5 in, 5 out, 3 calls" in second


def test_usage_with_no_calls_says_so() -> None:
    assert "No model calls today." in usage_text([], [], NOW) and "No model calls this week." in usage_text([], [], NOW)


def test_cost_per_model_per_chat_and_total_with_unknown_prices_left_out(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"openai:a": {"input": 2, "output": 10}}')
    rows = [
        total("openai:a", "telegram:1", 1_000_000, 100_000),  # $2 + $1
        total("openai:a", "telegram:2", 500_000, 0),  # $1
        total("openai:mystery", "telegram:2", 7, 7),
        total("local:small.gguf", "telegram:1", 40, 40),
    ]
    text = cost_text(rows, Prices.load(path), "today (since 00:00 UTC)")
    assert "• openai:a: $4.00 (1,500,000 in, 100,000 out)" in text
    assert "• openai:mystery: price unknown (7 in, 7 out)" in text
    assert "• local:small.gguf: $0 (40 in, 40 out) (runs on this machine)" in text
    assert "• telegram:1: $3.00" in text
    assert "• telegram:2: $1.00, plus calls of a model with no known price" in text
    assert "Total: $4.00" in text
    assert f"Not in the total: openai:mystery (price unknown). Give a model its price in {path}" in text


def test_a_reported_cost_is_used_as_it_is(tmp_path: Path) -> None:
    rows = [total("claude-code:sonnet", "telegram:1", 10, 10, cost=0.25)]
    assert "Total: $0.2500" in cost_text(rows, Prices.load(tmp_path / "none.json"), "today")


def test_cost_with_no_calls_and_with_a_broken_file(tmp_path: Path) -> None:
    assert cost_text([], Prices.load(tmp_path / "none.json"), "this week (since …)") == "No model calls this week: nothing spent."
    path = tmp_path / "prices.json"
    path.write_text("{")
    assert cost_text([], Prices.load(path), "today").startswith(f"Your prices file {path} was not read")


def test_money_is_rounded_to_what_matters() -> None:
    assert [money(x) for x in (0, 0.00001, 0.01234, 0.6, 4.5678, 1234.5)] == [
        "$0", "<$0.0001", "$0.0123", "$0.6000", "$4.57", "$1,234.50"
    ]


# --- /model ---


def setup(mode: str = "bicameral", back: str = "openai:back", missing: str | None = None) -> ModelSetup:
    return ModelSetup(ModelChoices(), mode, "openai:front", back, lambda ref: missing)


def test_switching_globally_then_here_then_back() -> None:
    s = setup()
    answer = switch(s, "back openai:big", "c1")
    assert answer == "From the next call on, the back model is openai:big everywhere (it was openai:back)."
    assert switch(s, "front openai:small here", "c1").endswith("is openai:small in this chat (it was openai:front).")
    assert s.choices.chosen("front", "c1") == "openai:small" and s.choices.chosen("front", "c2") is None
    assert "Front: openai:front (as configured); in this chat: openai:small" in show(s, "c1")
    assert "Back: openai:big (your choice; configured: openai:back)" in show(s, "c2")
    assert "chats with their own: c1" in show(s, "c2")
    assert switch(s, "FRONT default HERE", "c1").endswith("the one used everywhere again: openai:front.")
    answer = switch(s, "back default", "c1")
    assert answer == "From the next call on, the back model is openai:back everywhere again, as configured."
    assert s.choices.chosen("back", None) is None and s.choices.chosen("front", "c1") is None


def test_choosing_the_configured_model_clears_the_global_choice() -> None:
    s = setup()
    switch(s, "back openai:big", "c1")
    switch(s, "back openai:back", "c1")
    assert s.choices.global_choice("back") is None


def test_refusals_change_nothing() -> None:
    s = setup(missing="Anthropic models need ANTHROPIC_API_KEY, which is not set.")
    answer = switch(s, "back anthropic:claude-sonnet-4-5", "c1")
    assert answer == "Not switched: Anthropic models need ANTHROPIC_API_KEY, which is not set."
    assert switch(setup(), "back nope:x", "c1").startswith("Not switched: unknown model provider 'nope'")
    assert "can't call tools" in switch(setup(), "front local", "c1")
    assert switch(setup(), "middle openai:x", "c1").startswith("Say which part")
    assert switch(setup(), "back", "c1").startswith("Say which part")
    assert switch(setup(), "back openai:x openai:y", "c1").startswith("Say which part")
    assert s.choices.chosen("back", "c1") is None


def test_single_mode_has_one_model_and_local_is_allowed() -> None:
    s = setup(mode="single")
    assert "the one model (single mode) is local" in switch(s, "front local", "c1")
    assert s.choices.chosen("back", None) == "local" and s.choices.chosen("front", None) is None
    assert show(s, "c1").startswith("The one model (single mode): local (your choice; configured: openai:back)")


def test_the_claude_code_cli_is_not_switched_here() -> None:
    bicameral = setup(back="claude-code:sonnet")
    assert "The back is the Claude Code CLI (claude-code:sonnet)" in switch(bicameral, "back openai:x", "c1")
    assert "front model is openai:x" in switch(bicameral, "front openai:x", "c1")
    assert "Back: the Claude Code CLI (claude-code:sonnet), chosen at start" in show(bicameral, "c1")
    single = setup(mode="single", back="claude-code:sonnet")
    assert "The assistant is the Claude Code CLI" in switch(single, "front openai:x", "c1")
    assert show(single, "c1").startswith("The Claude Code CLI (claude-code:sonnet) answers everything")
    assert single.choices.chosen("back", None) is None
