"""The one map from CLI stderr, result text and API status to a user-facing message and what to do next."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from bicameral.failures import failure_sentence


class Recovery(str, Enum):
    KEEP_SESSION = "keep_session"  # the session is fine; say what is wrong and carry on
    FRESH_SESSION = "fresh_session"  # the session itself is broken: forget it and start a new one
    GIVE_UP = "give_up"  # nothing this process can do will help: tell people and exit


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str  # what the user is told, one or two plain sentences
    recovery: Recovery
    detail: str = ""  # the raw evidence, for logs only
    retry: bool = False  # the turn may be sent again at once in the fresh session


class WorkerGaveUp(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass(frozen=True)
class FailurePattern:
    """One failure mode: adding a mode is adding one of these to PATTERNS."""

    kind: str
    pattern: re.Pattern[str]
    message: str
    recovery: Recovery
    statuses: tuple[int, ...] = ()
    retry: bool = False


def _p(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


# First match wins: specific evidence before general evidence. What the user is told comes from the
# one failure table, by kind.
PATTERNS: tuple[FailurePattern, ...] = (
    FailurePattern(
        "session_missing",
        _p(r"No conversation found with session ID"),
        failure_sentence("session_missing"),
        Recovery.FRESH_SESSION,
        retry=True,
    ),
    FailurePattern(
        "cli_missing",
        _p(r"claude: (?:command )?not found|spawn \S*claude\S* ENOENT|executable not found"),
        failure_sentence("cli_missing"),
        Recovery.GIVE_UP,
    ),
    FailurePattern(
        "usage_limit",
        _p(
            r"usage limit|hit your (?:usage )?limit|out of (?:extra )?usage|credit balance is too low|"
            r"insufficient (?:credit|quota)|quota|billing"
        ),
        failure_sentence("usage_limit"),
        Recovery.KEEP_SESSION,
        statuses=(402,),
    ),
    FailurePattern(
        "rate_limit",
        _p(r"rate[ _-]?limit|too many requests|\b429\b"),
        failure_sentence("rate_limit"),
        Recovery.KEEP_SESSION,
        statuses=(429,),
    ),
    FailurePattern(
        "auth",
        _p(
            r"authentication_failed|authentication_error|invalid x-api-key|invalid api key|invalid bearer token|"
            r"oauth token (?:has )?expired|please run /login|not logged in|\b401\b"
        ),
        failure_sentence("auth"),
        Recovery.KEEP_SESSION,
        statuses=(401, 403),
    ),
    FailurePattern(
        "unavailable",
        _p(
            r"issue with the selected model|model[^.\n]{0,40}(?:not found|does not exist|not available)|"
            r"not_found_error|invalid model"
        ),
        failure_sentence("unavailable"),
        Recovery.KEEP_SESSION,
        statuses=(404,),
    ),
    FailurePattern(
        "overloaded",
        _p(r"overloaded|\b529\b"),
        failure_sentence("overloaded"),
        Recovery.KEEP_SESSION,
        statuses=(529,),
    ),
    FailurePattern(
        "connection",
        _p(r"ECONNREFUSED|ECONNRESET|ENOTFOUND|ETIMEDOUT|connection error|unable to connect|fetch failed"),
        failure_sentence("connection"),
        Recovery.KEEP_SESSION,
    ),
    FailurePattern(
        "server",
        _p(r"API Error: 5\d\d|internal server error|server_error|api_error"),
        failure_sentence("server"),
        Recovery.KEEP_SESSION,
        statuses=(500, 502, 503, 504),
    ),
    FailurePattern(
        "prompt_too_long",
        _p(r"prompt is too long|context (?:window|length)|too many tokens|request_too_large"),
        failure_sentence("prompt_too_long"),
        Recovery.FRESH_SESSION,
        statuses=(413,),
    ),
    FailurePattern(
        "refused",
        _p(r"usage polic|content filter|content policy"),
        failure_sentence("refused"),
        Recovery.FRESH_SESSION,
    ),
)

_BROKEN = FailurePattern(
    "rejected",
    _p(r"$^"),
    failure_sentence("rejected"),
    Recovery.FRESH_SESSION,
)


def classify(*evidence: str, status: int | None = None) -> Failure | None:
    """The first known failure in the evidence (stderr, result or assistant text), else None."""
    text = "\n".join(e for e in evidence if e)
    for pattern in PATTERNS:
        if pattern.pattern.search(text):
            return _failure(pattern, text)
    if status is not None:
        for pattern in PATTERNS:
            if status in pattern.statuses:
                return _failure(pattern, text)
    return None


def classify_rejected_turn(text: str, status: int | None, stderr: Iterable[str] = ()) -> Failure:
    """An `is_error` result: a known failure if the evidence names one, else a broken session."""
    found = classify(text, status=status) or classify(*stderr)
    return found or _failure(_BROKEN, text)


def crash_failure(exit_code: int | None, stderr: Iterable[str] = ()) -> Failure:
    """Why the process died, as far as its stderr tells."""
    lines = list(stderr)
    found = classify(*lines)
    if found is not None:
        return found
    code = "killed" if exit_code is None else f"exit code {exit_code}"
    return Failure(
        "crash",
        failure_sentence("crash"),
        Recovery.KEEP_SESSION,
        detail=f"{code}: {' | '.join(lines[-3:])}",
    )


def launch_failure(binary: str, exc: OSError) -> Failure:
    """A CLI that would not start: not installed where we look for it (nothing to retry), or else a crash."""
    if isinstance(exc, FileNotFoundError):
        return Failure("cli_missing", failure_sentence("cli_missing"), Recovery.GIVE_UP, detail=str(exc))
    return crash_failure(None, [f"{binary}: {exc}"])


def exit_failure(exit_code: int | None, stderr: Iterable[str], *, ending: bool, reason: str) -> Failure:
    """An exit we did not expect; a crash while we were ending the process (it went silent) is a stall."""
    failure = crash_failure(exit_code, stderr)
    if ending and failure.kind == "crash":
        return Failure("stalled", failure_sentence("stalled"), Recovery.KEEP_SESSION, detail=reason)
    return failure


def _failure(pattern: FailurePattern, evidence: str) -> Failure:
    return Failure(pattern.kind, pattern.message, pattern.recovery, detail=evidence[-500:], retry=pattern.retry)
