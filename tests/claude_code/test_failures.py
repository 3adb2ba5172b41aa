"""The failure classifier: CLI stderr, result text and API status to a message and a recovery."""

from __future__ import annotations

import pytest

from bicameral.claude_code.failures import (
    PATTERNS,
    Recovery,
    classify,
    classify_rejected_turn,
    crash_failure,
)


@pytest.mark.parametrize(
    ("evidence", "kind", "recovery"),
    [
        # Texts the real CLI writes (result text or its synthetic assistant message).
        (
            "There's an issue with the selected model (claude-nope). It may not exist or you may not have access to it.",
            "unavailable",
            Recovery.KEEP_SESSION,
        ),
        ("Prompt is too long · the request is ~300000 tokens (limit 200000)", "prompt_too_long", Recovery.FRESH_SESSION),
        ("API Error: 400 Output blocked by content filtering policy", "refused", Recovery.FRESH_SESSION),
        (
            "No conversation found with session ID: 00000000-0000-4000-8000-000000000000",
            "session_missing",
            Recovery.FRESH_SESSION,
        ),
        ("Invalid API key · Please run /login", "auth", Recovery.KEEP_SESSION),
        ("API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\"}}", "auth", Recovery.KEEP_SESSION),
        ("OAuth token has expired. Please obtain a new token or refresh your existing token.", "auth", Recovery.KEEP_SESSION),
        ("Claude AI usage limit reached|1767225600", "usage_limit", Recovery.KEEP_SESSION),
        ("You've hit your limit · resets 3pm", "usage_limit", Recovery.KEEP_SESSION),
        ("Your credit balance is too low to access the Anthropic API.", "usage_limit", Recovery.KEEP_SESSION),
        ("API Error: 429 rate_limit_error: Number of requests has exceeded your rate limit", "rate_limit", Recovery.KEEP_SESSION),
        ("API Error: 529 Overloaded", "overloaded", Recovery.KEEP_SESSION),
        ("API Error: Connection error. connect ECONNREFUSED 127.0.0.1:9", "connection", Recovery.KEEP_SESSION),
        ("API Error: 500 Internal server error", "server", Recovery.KEEP_SESSION),
        ("/bin/sh: 1: claude: not found", "cli_missing", Recovery.GIVE_UP),
    ],
)
def test_known_failures_are_recognised(evidence, kind, recovery):
    failure = classify(evidence)
    assert failure is not None and failure.kind == kind and failure.recovery is recovery
    assert failure.message and "Traceback" not in failure.message


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, "rate_limit"),
        (401, "auth"),
        (403, "auth"),
        (402, "usage_limit"),
        (404, "unavailable"),
        (529, "overloaded"),
        (503, "server"),
        (413, "prompt_too_long"),
    ],
)
def test_an_api_status_alone_is_enough(status, kind):
    failure = classify("something opaque happened", status=status)
    assert failure is not None and failure.kind == kind


def test_unknown_evidence_is_not_a_known_failure():
    assert classify("The capital of France is Paris.") is None
    assert classify("") is None


def test_a_rejected_turn_without_known_evidence_is_a_broken_session():
    failure = classify_rejected_turn("something the API did not like", status=400)
    assert failure.kind == "rejected" and failure.recovery is Recovery.FRESH_SESSION
    assert "fresh conversation" in failure.message


def test_a_rejected_turn_looks_at_stderr_when_the_text_says_nothing():
    failure = classify_rejected_turn("", None, ["[warn] retrying", "Error: Invalid API key · Please run /login"])
    assert failure.kind == "auth" and failure.recovery is Recovery.KEEP_SESSION


def test_a_session_that_cannot_be_reopened_may_be_retried():
    failure = classify_rejected_turn("", None, ["No conversation found with session ID: abc"])
    assert failure.kind == "session_missing" and failure.retry


def test_an_unexplained_crash_keeps_the_session_and_keeps_the_evidence():
    failure = crash_failure(3, ["loading", "Error: the native module failed to load"])
    assert failure.kind == "crash" and failure.recovery is Recovery.KEEP_SESSION
    assert "exit code 3" in failure.detail and "native module" in failure.detail


def test_every_pattern_is_one_complete_entry():
    kinds = [p.kind for p in PATTERNS]
    assert len(kinds) == len(set(kinds))
    for pattern in PATTERNS:
        assert pattern.message.endswith((".", ")")) and len(pattern.message) < 300
        assert isinstance(pattern.recovery, Recovery)
